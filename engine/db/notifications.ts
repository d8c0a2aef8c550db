// The notification outbox: every notification a user gets is a row here, read by the app (list, stream) whether or
// not a push service is configured.
import type { Knex } from 'knex';
import { isoNow } from './store.js';
import { select } from './prepared.js';

/** What sent a notification: an app directly, an app's proactive prompt, a webhook's reply, the day summary, the service. */
export const NOTIFICATION_SOURCES = ['app', 'proactive', 'webhook', 'day_summary', 'system'] as const;
export type NotificationSource = (typeof NOTIFICATION_SOURCES)[number];

export interface NotificationInput {
  title: string;
  body: string;
  /** String values only, as push services carry them. */
  data: Record<string, string>;
  source: NotificationSource;
  appId?: string | null;
}

export interface NotificationRecord extends Required<NotificationInput> {
  id: number;
  uid: string;
  createdAt: string;
  readAt: string | null;
}

interface Row {
  id: number | string;
  uid: string;
  source: string;
  app_id: string | null;
  title: string;
  body: string;
  data: string;
  created_at: string;
  read_at: string | null;
}

const toRecord = (r: Row): NotificationRecord => ({
  id: Number(r.id),
  uid: r.uid,
  source: r.source as NotificationSource,
  appId: r.app_id,
  title: r.title,
  body: r.body,
  data: JSON.parse(r.data) as Record<string, string>,
  createdAt: r.created_at,
  readAt: r.read_at,
});

export class NotificationsRepository {
  constructor(private readonly knex: Knex) {}

  /** On every notification sent: a kept statement, not the query builder. */
  async add(uid: string, n: NotificationInput, now: number): Promise<NotificationRecord> {
    const row = { uid, source: n.source, app_id: n.appId ?? null, title: n.title, body: n.body, data: JSON.stringify(n.data), created_at: isoNow(now), read_at: null };
    const [inserted] = await select<{ id: number | string }>(
      this.knex,
      'insert into notifications (uid, source, app_id, title, body, data, created_at) values (?, ?, ?, ?, ?, ?, ?) returning id',
      [row.uid, row.source, row.app_id, row.title, row.body, row.data, row.created_at],
    );
    return toRecord({ ...row, id: inserted!.id });
  }

  /**
   * What a direct notification needs in one read: the app whose secret hashes to `secretHash`, and whether `uid`
   * installed it. Undefined when no app has that secret.
   */
  async directTarget(secretHash: string, uid: string): Promise<{ appId: string; appName: string; installed: boolean } | undefined> {
    const [row] = await select<{ id: string; name: string; installed: number | null }>(
      this.knex,
      'select a.id, a.name, (select 1 from app_installs i where i.app_id = a.id and i.uid = ?) as installed from apps a where a.secret_hash = ?',
      [uid, secretHash],
    );
    return row ? { appId: row.id, appName: row.name, installed: row.installed !== null } : undefined;
  }

  async get(id: number): Promise<NotificationRecord | undefined> {
    const r = (await this.knex('notifications').where({ id }).first()) as Row | undefined;
    return r ? toRecord(r) : undefined;
  }

  /** A page of the user's notifications, newest first. */
  async list(uid: string, o: { limit: number; offset: number; unreadOnly?: boolean }): Promise<NotificationRecord[]> {
    const q = this.knex('notifications').where({ uid });
    if (o.unreadOnly) q.whereNull('read_at');
    const rows = (await q.orderBy('id', 'desc').limit(o.limit).offset(o.offset)) as Row[];
    return rows.map(toRecord);
  }

  /** The user's notifications after `afterId`, oldest first, at most `limit` (a stream's replay). */
  async after(uid: string, afterId: number, limit: number): Promise<NotificationRecord[]> {
    const rows = (await this.knex('notifications').where({ uid }).andWhere('id', '>', afterId).orderBy('id', 'asc').limit(limit)) as Row[];
    return rows.map(toRecord);
  }

  /** Marks the user's unread notifications read: those in `ids`, or every one up to `upTo`; answers how many changed. */
  async markRead(uid: string, sel: { ids?: readonly number[]; upTo?: number }, now: number): Promise<number> {
    const q = this.knex('notifications').where({ uid }).whereNull('read_at');
    if (sel.ids !== undefined) q.whereIn('id', sel.ids);
    if (sel.upTo !== undefined) q.andWhere('id', '<=', sel.upTo);
    return q.update({ read_at: isoNow(now) });
  }
}
