// Erasing an account from the store: every row that is the user's, or about them, and the apps they own with what
// hangs off those apps. Idempotent: a run cut short is finished by the next one.
import { createHash } from 'node:crypto';
import type { Knex } from 'knex';
import { isoNow } from './store.js';

/** Conversations whose segments and photos are deleted per step, so no one statement holds the store long. */
const CONVERSATIONS_PER_STEP = 50;

/** What the caller must still do once the rows are gone. */
export interface ErasedAccount {
  /** Hashes of the developer and MCP keys deleted: every node's key cache must forget them. */
  keyHashes: string[];
  /** Rows deleted, all tables together. */
  rows: number;
}

/** Tables holding rows of one user, by the column naming them; deleted in this order (children first). */
const USER_ROWS: readonly [table: string, column: string][] = [
  ['person_samples', 'uid'],
  ['people', 'uid'],
  ['speech_profiles', 'uid'],
  ['memories', 'user_id'],
  ['action_items', 'user_id'],
  ['goals', 'user_id'],
  ['folders', 'user_id'],
  ['stt_usage', 'uid'],
  ['app_replies', 'uid'],
  ['proactive_notifications', 'uid'],
  ['notifications', 'uid'],
  ['owner_notifications', 'uid'],
  ['push_tokens', 'uid'],
  ['user_settings', 'uid'],
  ['daily_summaries', 'uid'],
  ['sync_jobs', 'user_id'],
  ['sync_files', 'user_id'],
  ['developer_webhooks', 'uid'],
  ['app_installs', 'uid'],
  ['webhook_deliveries', 'uid'],
];

/** Deletes every row of `uid`'s from the store; answers what the caches must forget and how many rows went. */
export async function eraseAccount(knex: Knex, uid: string): Promise<ErasedAccount> {
  let rows = 0;
  // Conversations a step at a time, each with its segments and photos (the foreign keys would cascade, but sqlite
  // enforces them only when asked to: say it outright).
  for (;;) {
    const ids = (await knex('conversations').where({ user_id: uid }).select('id').limit(CONVERSATIONS_PER_STEP)).map((r: { id: string }) => r.id);
    if (ids.length === 0) break;
    rows += await knex('conversation_segments').whereIn('conversation_id', ids).del();
    rows += await knex('conversation_photos').whereIn('conversation_id', ids).del();
    rows += await knex('conversations').whereIn('id', ids).del();
  }
  rows += await knex('goal_history').whereIn('goal_id', knex('goals').where({ user_id: uid }).select('id')).del();
  for (const [table, column] of USER_ROWS) rows += await knex(table).where(column, uid).del();
  // The user's own webhooks, and the apps they own with everything that hangs off them (other users' installs too).
  for (const table of ['webhook_secrets', 'webhook_endpoint_health', 'webhook_deliveries']) {
    rows += await knex(table).where({ owner_kind: 'user', owner_id: uid }).del();
    rows += await knex(table).where({ owner_kind: 'app' }).whereIn('owner_id', knex('apps').where({ owner_uid: uid }).select('id')).del();
  }
  rows += await knex('app_installs').whereIn('app_id', knex('apps').where({ owner_uid: uid }).select('id')).del();
  rows += await knex('apps').where({ owner_uid: uid }).del();
  const keyHashes = (await knex('api_keys').where({ user_id: uid }).select('key_hash')).map((r: { key_hash: string }) => r.key_hash);
  rows += await knex('api_keys').where({ user_id: uid }).del();
  rows += await knex('users').where({ id: uid }).del();
  return { keyHashes, rows };
}

/**
 * When accounts were deleted, by the SHA-256 of the user id (the row does not name the user). ID tokens issued before
 * a deletion are refused while its row lasts (the retention sweep prunes it).
 */
export class DeletedAccounts {
  constructor(private readonly knex: Knex) {}

  /** Records `uid`'s account as deleted at `atMs`; a later deletion of the same id moves the time on. */
  async record(uid: string, atMs: number): Promise<void> {
    await this.knex('deleted_accounts').insert({ id: uidHash(uid), deleted_at: isoNow(atMs) }).onConflict('id').merge(['deleted_at']);
  }

  /** When `uid`'s account was last deleted, in epoch ms; undefined when it never was (or the row was pruned). */
  async deletedAt(uid: string): Promise<number | undefined> {
    const row = (await this.knex('deleted_accounts').where({ id: uidHash(uid) }).first('deleted_at')) as { deleted_at: string } | undefined;
    return row === undefined ? undefined : Date.parse(row.deleted_at);
  }
}

const uidHash = (uid: string): string => createHash('sha256').update(uid).digest('hex');
