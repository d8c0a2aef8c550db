// Apps a developer submits (capabilities, webhook, setup links) and the installs users make of them. The app secret
// is kept only as its SHA-256 hash, like API keys.
import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import { bool, isoNow } from './store.js';

/** What an app can do, as the compatible system names it. */
export const APP_CAPABILITIES = ['external_integration', 'proactive_notification'] as const;
export type AppCapability = (typeof APP_CAPABILITIES)[number];

/** When an `external_integration` app's webhook fires. */
export const APP_TRIGGERS = ['memory_creation', 'transcript_processed', 'audio_bytes'] as const;
export type AppTrigger = (typeof APP_TRIGGERS)[number];

/** What a `proactive_notification` app may put in its prompts, granted by installing it. */
export const PROACTIVE_SCOPES = ['user_name', 'user_facts', 'user_context', 'user_chat'] as const;
export type ProactiveScope = (typeof PROACTIVE_SCOPES)[number];

export interface AppFields {
  name: string;
  description: string;
  capabilities: AppCapability[];
  triggersOn: AppTrigger | null;
  webhookUrl: string | null;
  proactiveScopes: ProactiveScope[];
  setupCompletedUrl: string | null;
  authUrl: string | null;
  setupInstructions: string | null;
  private: boolean;
}

export interface AppRecord extends AppFields {
  id: string;
  ownerUid: string;
  webhookEnabled: boolean;
  secretPrefix: string;
  createdAt: string;
  updatedAt: string;
}

export interface Installation {
  appId: string;
  uid: string;
  scopes: ProactiveScope[];
  installedAt: string;
}

interface Row {
  id: string;
  owner_uid: string;
  name: string;
  description: string;
  capabilities: string;
  triggers_on: string | null;
  webhook_url: string | null;
  webhook_enabled: unknown;
  proactive_scopes: string;
  setup_completed_url: string | null;
  auth_url: string | null;
  setup_instructions: string | null;
  private: unknown;
  secret_hash: string;
  secret_prefix: string;
  created_at: string;
  updated_at: string;
}

const toRecord = (r: Row): AppRecord => ({
  id: r.id,
  ownerUid: r.owner_uid,
  name: r.name,
  description: r.description,
  capabilities: JSON.parse(r.capabilities) as AppCapability[],
  triggersOn: r.triggers_on as AppTrigger | null,
  webhookUrl: r.webhook_url,
  webhookEnabled: bool(r.webhook_enabled),
  proactiveScopes: JSON.parse(r.proactive_scopes) as ProactiveScope[],
  setupCompletedUrl: r.setup_completed_url,
  authUrl: r.auth_url,
  setupInstructions: r.setup_instructions,
  private: bool(r.private),
  secretPrefix: r.secret_prefix,
  createdAt: r.created_at,
  updatedAt: r.updated_at,
});

function fieldColumns(f: Partial<AppFields>): Partial<Row> {
  const c: Partial<Row> = {};
  if (f.name !== undefined) c.name = f.name;
  if (f.description !== undefined) c.description = f.description;
  if (f.capabilities !== undefined) c.capabilities = JSON.stringify(f.capabilities);
  if (f.triggersOn !== undefined) c.triggers_on = f.triggersOn;
  if (f.webhookUrl !== undefined) c.webhook_url = f.webhookUrl;
  if (f.proactiveScopes !== undefined) c.proactive_scopes = JSON.stringify(f.proactiveScopes);
  if (f.setupCompletedUrl !== undefined) c.setup_completed_url = f.setupCompletedUrl;
  if (f.authUrl !== undefined) c.auth_url = f.authUrl;
  if (f.setupInstructions !== undefined) c.setup_instructions = f.setupInstructions;
  if (f.private !== undefined) c.private = f.private;
  return c;
}

export class AppsRepository {
  constructor(private readonly knex: Knex) {}

  async create(input: { ownerUid: string; fields: AppFields; secretHash: string; secretPrefix: string; now: number }): Promise<AppRecord> {
    const at = isoNow(input.now);
    const row = {
      id: randomUUID(),
      owner_uid: input.ownerUid,
      ...fieldColumns(input.fields),
      webhook_enabled: true,
      secret_hash: input.secretHash,
      secret_prefix: input.secretPrefix,
      created_at: at,
      updated_at: at,
    } as Row;
    await this.knex('apps').insert(row);
    return toRecord(row);
  }

  async get(id: string): Promise<AppRecord | undefined> {
    const row = (await this.knex('apps').where({ id }).first()) as Row | undefined;
    return row ? toRecord(row) : undefined;
  }

  /** The app when `uid` may see it: their own, or a public one. */
  async visible(id: string, uid: string): Promise<AppRecord | undefined> {
    const app = await this.get(id);
    return app && (app.ownerUid === uid || !app.private) ? app : undefined;
  }

  /** The app when `uid` owns it. */
  async owned(id: string, uid: string): Promise<AppRecord | undefined> {
    const app = await this.get(id);
    return app && app.ownerUid === uid ? app : undefined;
  }

  /** Public apps and the user's own, newest first (ties by id, so the order is stable). */
  async listVisible(uid: string): Promise<AppRecord[]> {
    const rows = (await this.knex('apps')
      .where((q) => q.where({ private: false }).orWhere({ owner_uid: uid }))
      .orderBy([{ column: 'created_at', order: 'desc' }, { column: 'id', order: 'desc' }])) as Row[];
    return rows.map(toRecord);
  }

  /** Apps `uid` installed, whoever owns them and whether or not they are still public. */
  async listInstalled(uid: string): Promise<AppRecord[]> {
    const rows = (await this.knex('apps as a')
      .join('app_installs as i', 'i.app_id', 'a.id')
      .where('i.uid', uid)
      .orderBy([{ column: 'a.created_at', order: 'desc' }, { column: 'a.id', order: 'desc' }])
      .select('a.*')) as Row[];
    return rows.map(toRecord);
  }

  /** Updates the owner's app; undefined when it is not theirs. */
  async update(ownerUid: string, id: string, fields: Partial<AppFields>, now: number): Promise<AppRecord | undefined> {
    const n = await this.knex('apps').where({ id, owner_uid: ownerUid }).update({ ...fieldColumns(fields), updated_at: isoNow(now) });
    return n > 0 ? this.get(id) : undefined;
  }

  /** Deletes the owner's app, its installs and its webhook secret; false when it is not theirs. */
  async delete(ownerUid: string, id: string): Promise<boolean> {
    return this.knex.transaction(async (trx) => {
      const n = await trx('apps').where({ id, owner_uid: ownerUid }).delete();
      if (n === 0) return false;
      // sqlite enforces the cascade only with foreign_keys on (it is); delete explicitly so both dialects agree.
      await trx('app_installs').where({ app_id: id }).delete();
      await trx('webhook_secrets').where({ owner_kind: 'app', owner_id: id }).delete();
      return true;
    });
  }

  /** Replaces the owner's app secret (the old one stops working at once); false when the app is not theirs. */
  async replaceSecret(ownerUid: string, id: string, secretHash: string, secretPrefix: string, now: number): Promise<boolean> {
    const n = await this.knex('apps').where({ id, owner_uid: ownerUid }).update({ secret_hash: secretHash, secret_prefix: secretPrefix, updated_at: isoNow(now) });
    return n > 0;
  }

  /** Turns the app's webhook off or back on for every user (a receiver that answered 410, or its owner); false when no such app. */
  async setWebhookEnabled(id: string, enabled: boolean, now: number): Promise<boolean> {
    return (await this.knex('apps').where({ id }).update({ webhook_enabled: enabled, updated_at: isoNow(now) })) > 0;
  }

  /** Turns an enabled app webhook off (its receiver is gone or kept failing); false when it was not on. */
  async disableWebhook(id: string, now: number): Promise<boolean> {
    return (await this.knex('apps').where({ id, webhook_enabled: true }).update({ webhook_enabled: false, updated_at: isoNow(now) })) > 0;
  }

  /** The app whose secret hashes to `secretHash` (for an app calling the service with its secret). */
  async findBySecretHash(secretHash: string): Promise<AppRecord | undefined> {
    const row = (await this.knex('apps').where({ secret_hash: secretHash }).first()) as Row | undefined;
    return row ? toRecord(row) : undefined;
  }

  /** Installs (or re-installs, refreshing the granted scopes). */
  async install(appId: string, uid: string, scopes: readonly ProactiveScope[], now: number): Promise<Installation> {
    const row = { app_id: appId, uid, scopes: JSON.stringify(scopes), installed_at: isoNow(now) };
    await this.knex('app_installs').insert(row).onConflict(['app_id', 'uid']).merge(['scopes']);
    return (await this.installation(appId, uid))!;
  }

  /** false when the user had not installed it. */
  async uninstall(appId: string, uid: string): Promise<boolean> {
    return (await this.knex('app_installs').where({ app_id: appId, uid }).delete()) > 0;
  }

  async installation(appId: string, uid: string): Promise<Installation | undefined> {
    const row = (await this.knex('app_installs').where({ app_id: appId, uid }).first()) as { app_id: string; uid: string; scopes: string; installed_at: string } | undefined;
    return row ? { appId: row.app_id, uid: row.uid, scopes: JSON.parse(row.scopes) as ProactiveScope[], installedAt: row.installed_at } : undefined;
  }

  async installedIds(uid: string): Promise<Set<string>> {
    const rows = (await this.knex('app_installs').where({ uid }).select('app_id')) as { app_id: string }[];
    return new Set(rows.map((r) => r.app_id));
  }
}
