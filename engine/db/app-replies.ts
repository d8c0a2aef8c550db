// Replies of live transcript endpoints worth acting on (a message to push, a proactive notification request), kept
// for the notifications that act on them.
import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import { isoNow } from './store.js';

export type AppReplyKind = 'message' | 'notification';

export interface AppReply {
  id: string;
  /** null for the user's own developer webhook. */
  appId: string | null;
  uid: string;
  sessionId: string;
  kind: AppReplyKind;
  /** The reply as the endpoint sent it (parsed JSON). */
  reply: Record<string, unknown>;
  receivedAt: string;
}

interface Row {
  id: string;
  app_id: string | null;
  uid: string;
  session_id: string;
  kind: string;
  reply: string;
  received_at: string;
}

export class AppRepliesRepository {
  constructor(private readonly knex: Knex) {}

  /** Stores one reply; `json` is its JSON text, already bounded by the caller. */
  async add(r: Omit<AppReply, 'id' | 'receivedAt' | 'reply'>, json: string, now: number): Promise<AppReply> {
    const row: Row = { id: randomUUID(), app_id: r.appId, uid: r.uid, session_id: r.sessionId, kind: r.kind, reply: json, received_at: isoNow(now) };
    await this.knex('app_replies').insert(row);
    return toReply(row);
  }

  /** A user's replies, oldest first. */
  async list(uid: string): Promise<AppReply[]> {
    const rows = (await this.knex('app_replies').where({ uid }).orderBy([{ column: 'received_at' }, { column: 'id' }])) as Row[];
    return rows.map(toReply);
  }
}

function toReply(r: Row): AppReply {
  return { id: r.id, appId: r.app_id, uid: r.uid, sessionId: r.session_id, kind: r.kind as AppReplyKind, reply: JSON.parse(r.reply) as Record<string, unknown>, receivedAt: r.received_at };
}
