// Developer webhook settings (one URL per user and type), webhook signing secrets per owner, and the query the
// delivery code asks: every enabled endpoint of a user for one trigger, the user's own and their installed apps'.
import type { Knex } from 'knex';
import { bool, isoNow } from './store.js';
import { inJsonList, select } from './prepared.js';

/** The four developer webhook types, as the compatible system names them. */
export const DEVELOPER_WEBHOOK_TYPES = ['memory_created', 'realtime_transcript', 'audio_bytes', 'day_summary'] as const;
export type DeveloperWebhookType = (typeof DEVELOPER_WEBHOOK_TYPES)[number];

/** The app trigger (`external_integration.triggers_on`) each developer webhook type corresponds to; day summaries go to users only. */
export const APP_TRIGGER_OF: Readonly<Record<DeveloperWebhookType, string | undefined>> = {
  memory_created: 'memory_creation',
  realtime_transcript: 'transcript_processed',
  audio_bytes: 'audio_bytes',
  day_summary: undefined,
};

/** Seconds of audio per `audio_bytes` request: the default, and the bounds a URL's `,seconds` may name. */
export const AUDIO_BYTES_SECONDS = { default: 5, min: 1, max: 60 } as const;

export interface DeveloperWebhook {
  type: DeveloperWebhookType;
  url: string;
  /** audio_bytes only. */
  seconds: number | null;
  enabled: boolean;
  updatedAt: string;
}

export interface WebhookSecretRecord {
  ownerKind: 'user' | 'app';
  ownerId: string;
  secret: string;
  previousSecret: string | null;
  /** ISO time after which the previous secret no longer signs. */
  previousExpiresAt: string | null;
  createdAt: string;
  rotatedAt: string | null;
}

/** One place a delivery goes: whose endpoint it is (whose secret signs it), the URL, and for audio the seconds per request. */
export interface WebhookEndpoint {
  ownerKind: 'user' | 'app';
  /** The user's uid for a developer webhook, the app's id for an app. */
  ownerId: string;
  url: string;
  /** audio_bytes only: seconds of audio per request. */
  seconds: number | null;
}

interface WebhookRow {
  uid: string;
  type: string;
  url: string;
  seconds: number | null;
  enabled: unknown;
  updated_at: string;
}

interface SecretRow {
  owner_kind: string;
  owner_id: string;
  secret: string;
  previous_secret: string | null;
  previous_expires_at: string | null;
  created_at: string;
  rotated_at: string | null;
}

const toSecret = (r: SecretRow): WebhookSecretRecord => ({
  ownerKind: r.owner_kind as 'user' | 'app',
  ownerId: r.owner_id,
  secret: r.secret,
  previousSecret: r.previous_secret,
  previousExpiresAt: r.previous_expires_at,
  createdAt: r.created_at,
  rotatedAt: r.rotated_at,
});

export class WebhooksRepository {
  constructor(private readonly knex: Knex) {}

  /** Sets (or replaces) the user's URL for one type; a new URL is enabled. */
  async set(uid: string, type: DeveloperWebhookType, url: string, seconds: number | null, now: number): Promise<void> {
    const row = { uid, type, url, seconds, enabled: true, updated_at: isoNow(now) };
    await this.knex('developer_webhooks').insert(row).onConflict(['uid', 'type']).merge(['url', 'seconds', 'enabled', 'updated_at']);
  }

  /** Removes the user's URL for one type (the compatible system's "save an empty URL"). */
  async clear(uid: string, type: DeveloperWebhookType): Promise<void> {
    await this.knex('developer_webhooks').where({ uid, type }).delete();
  }

  /** Enables or disables the user's URL for one type; false when no URL is set. */
  async setEnabled(uid: string, type: DeveloperWebhookType, enabled: boolean, now: number): Promise<boolean> {
    const n = await this.knex('developer_webhooks').where({ uid, type }).update({ enabled, updated_at: isoNow(now) });
    return n > 0;
  }

  /** Turns an enabled URL off (its receiver is gone or kept failing); false when it was not on. */
  async disable(uid: string, type: DeveloperWebhookType, now: number): Promise<boolean> {
    return (await this.knex('developer_webhooks').where({ uid, type, enabled: true }).update({ enabled: false, updated_at: isoNow(now) })) > 0;
  }

  async get(uid: string, type: DeveloperWebhookType): Promise<DeveloperWebhook | undefined> {
    const row = (await this.knex('developer_webhooks').where({ uid, type }).first()) as WebhookRow | undefined;
    return row ? { type: row.type as DeveloperWebhookType, url: row.url, seconds: row.seconds, enabled: bool(row.enabled), updatedAt: row.updated_at } : undefined;
  }

  async list(uid: string): Promise<DeveloperWebhook[]> {
    const rows = (await this.knex('developer_webhooks').where({ uid })) as WebhookRow[];
    return rows.map((row) => ({ type: row.type as DeveloperWebhookType, url: row.url, seconds: row.seconds, enabled: bool(row.enabled), updatedAt: row.updated_at }));
  }

  /**
   * Every enabled endpoint for user `uid` and `type`: the user's own URL, then each installed app whose
   * `triggers_on` is the matching app trigger and whose webhook is enabled (apps in install order). Apps get the
   * default seconds for audio.
   */
  async endpointsFor(uid: string, type: DeveloperWebhookType): Promise<WebhookEndpoint[]> {
    return (await this.endpointsForTypes(uid, [type]))[type] ?? [];
  }

  /**
   * endpointsFor() of several types at once, in one kept statement whatever their number (every conversation that
   * completes asks, and a live session asks for two types every minute).
   */
  async endpointsForTypes<T extends DeveloperWebhookType>(uid: string, types: readonly T[]): Promise<Record<T, WebhookEndpoint[]>> {
    const out = Object.fromEntries(types.map((t) => [t, [] as WebhookEndpoint[]])) as Record<T, WebhookEndpoint[]>;
    const triggers = types.map((t) => APP_TRIGGER_OF[t]).filter((x): x is string => x !== undefined);
    const sql = `SELECT 'user' AS kind, w.uid AS id, w.url AS url, w.seconds AS seconds, w.type AS type, '' AS installed_at FROM developer_webhooks w
      WHERE w.uid = ? AND w.enabled = ? AND ${inJsonList(this.knex, 'w.type')}
      UNION ALL SELECT 'app', a.id, a.webhook_url, NULL, a.triggers_on, i.installed_at FROM app_installs i JOIN apps a ON a.id = i.app_id
      WHERE i.uid = ? AND a.webhook_enabled = ? AND a.webhook_url IS NOT NULL AND ${inJsonList(this.knex, 'a.triggers_on')}`;
    const rows = await select<{ kind: 'user' | 'app'; id: string; url: string; seconds: number | null; type: string; installed_at: string }>(this.knex, sql, [uid, true, JSON.stringify(types), uid, true, JSON.stringify(triggers)]);
    // The user's own first, then apps in install order (ties by id).
    const apps = rows.filter((r) => r.kind === 'app').sort((a, b) => (a.installed_at < b.installed_at ? -1 : a.installed_at > b.installed_at ? 1 : a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    for (const type of types) {
      const own = rows.find((r) => r.kind === 'user' && r.type === type);
      if (own) out[type].push({ ownerKind: 'user', ownerId: uid, url: own.url, seconds: type === 'audio_bytes' ? (own.seconds ?? AUDIO_BYTES_SECONDS.default) : null });
      for (const a of apps) if (a.type === APP_TRIGGER_OF[type]) out[type].push({ ownerKind: 'app', ownerId: a.id, url: a.url, seconds: type === 'audio_bytes' ? AUDIO_BYTES_SECONDS.default : null });
    }
    return out;
  }

  /**
   * endpointsFor() of one type for several users, in one kept statement whatever their number (conversations that
   * complete together ask together): each user's endpoints, in endpointsFor()'s order; a user without any has none.
   */
  async endpointsForUsers(uids: readonly string[], type: DeveloperWebhookType): Promise<Map<string, WebhookEndpoint[]>> {
    const out = new Map<string, WebhookEndpoint[]>(uids.map((u) => [u, []]));
    if (uids.length === 0) return out;
    const sql = `SELECT 'user' AS kind, w.uid AS uid, w.uid AS id, w.url AS url, w.seconds AS seconds, '' AS installed_at FROM developer_webhooks w
      WHERE ${inJsonList(this.knex, 'w.uid')} AND w.enabled = ? AND w.type = ?
      UNION ALL SELECT 'app', i.uid, a.id, a.webhook_url, NULL, i.installed_at FROM app_installs i JOIN apps a ON a.id = i.app_id
      WHERE ${inJsonList(this.knex, 'i.uid')} AND a.webhook_enabled = ? AND a.webhook_url IS NOT NULL AND a.triggers_on = ?`;
    const list = JSON.stringify([...new Set(uids)]);
    // A type no app can take matches no app (NULL equals nothing).
    const rows = await select<{ kind: 'user' | 'app'; uid: string; id: string; url: string; seconds: number | null; installed_at: string }>(this.knex, sql, [list, true, type, list, true, APP_TRIGGER_OF[type] ?? null]);
    const seconds = (s: number | null): number | null => (type === 'audio_bytes' ? (s ?? AUDIO_BYTES_SECONDS.default) : null);
    for (const r of rows) if (r.kind === 'user') out.get(r.uid)?.push({ ownerKind: 'user', ownerId: r.uid, url: r.url, seconds: seconds(r.seconds) });
    // Apps after the user's own, in install order (ties by id).
    const apps = rows.filter((r) => r.kind === 'app').sort((a, b) => (a.installed_at < b.installed_at ? -1 : a.installed_at > b.installed_at ? 1 : a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    for (const a of apps) out.get(a.uid)?.push({ ownerKind: 'app', ownerId: a.id, url: a.url, seconds: seconds(null) });
    return out;
  }

  async secret(ownerKind: 'user' | 'app', ownerId: string): Promise<WebhookSecretRecord | undefined> {
    const row = (await this.knex('webhook_secrets').where({ owner_kind: ownerKind, owner_id: ownerId }).first()) as SecretRow | undefined;
    return row ? toSecret(row) : undefined;
  }

  /** The owner's secret, created with `fresh` when it has none (concurrent first reads agree on one). */
  async ensureSecret(ownerKind: 'user' | 'app', ownerId: string, fresh: string, now: number): Promise<WebhookSecretRecord> {
    await this.knex('webhook_secrets')
      .insert({ owner_kind: ownerKind, owner_id: ownerId, secret: fresh, previous_secret: null, previous_expires_at: null, created_at: isoNow(now), rotated_at: null })
      .onConflict(['owner_kind', 'owner_id'])
      .ignore();
    return (await this.secret(ownerKind, ownerId))!;
  }

  /** Makes `fresh` the owner's secret; the one it replaces stays valid until `now + overlapMs` (one statement: concurrent rotations cannot lose a secret half-way). */
  async rotateSecret(ownerKind: 'user' | 'app', ownerId: string, fresh: string, now: number, overlapMs: number): Promise<WebhookSecretRecord> {
    const n = await this.knex('webhook_secrets')
      .where({ owner_kind: ownerKind, owner_id: ownerId })
      .update({ previous_secret: this.knex.ref('secret'), secret: fresh, previous_expires_at: isoNow(now + overlapMs), rotated_at: isoNow(now) });
    if (n === 0) return this.ensureSecret(ownerKind, ownerId, fresh, now);
    return (await this.secret(ownerKind, ownerId))!;
  }

  async deleteSecret(ownerKind: 'user' | 'app', ownerId: string): Promise<void> {
    await this.knex('webhook_secrets').where({ owner_kind: ownerKind, owner_id: ownerId }).delete();
  }
}
