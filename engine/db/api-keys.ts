// API key records: hashes, prefixes and scopes; the secret itself is never stored.
import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import type { KeyKind, Scope } from '../protocol.js';
import { isoNow } from './store.js';

export interface ApiKeyRecord {
  id: string;
  userId: string;
  kind: KeyKind;
  name: string;
  keyPrefix: string;
  scopes: Scope[];
  createdAt: string;
  lastUsedAt: string | null;
}

interface Row {
  id: string;
  user_id: string;
  kind: string;
  name: string;
  key_hash: string;
  key_prefix: string;
  scopes: string;
  created_at: string;
  last_used_at: string | null;
}

const toRecord = (r: Row): ApiKeyRecord => ({
  id: r.id,
  userId: r.user_id,
  kind: r.kind as KeyKind,
  name: r.name,
  keyPrefix: r.key_prefix,
  scopes: JSON.parse(r.scopes) as Scope[],
  createdAt: r.created_at,
  lastUsedAt: r.last_used_at,
});

export class ApiKeysRepository {
  constructor(private readonly knex: Knex) {}

  async create(input: { userId: string; kind: KeyKind; name: string; hash: string; prefix: string; scopes: readonly Scope[]; now: number }): Promise<ApiKeyRecord> {
    const row: Row = {
      id: randomUUID(),
      user_id: input.userId,
      kind: input.kind,
      name: input.name,
      key_hash: input.hash,
      key_prefix: input.prefix,
      scopes: JSON.stringify(input.scopes),
      created_at: isoNow(input.now),
      last_used_at: null,
    };
    await this.knex('api_keys').insert(row);
    return toRecord(row);
  }

  /** Newest first; ties broken by id so pages are stable. */
  async listForUser(userId: string): Promise<ApiKeyRecord[]> {
    const rows = (await this.knex('api_keys').where({ user_id: userId }).orderBy([{ column: 'created_at', order: 'desc' }, { column: 'id', order: 'desc' }])) as Row[];
    return rows.map(toRecord);
  }

  async findByHash(hash: string): Promise<ApiKeyRecord | undefined> {
    const row = (await this.knex('api_keys').where({ key_hash: hash }).first()) as Row | undefined;
    return row ? toRecord(row) : undefined;
  }

  /** Deletes the user's key; returns its hash when something was deleted, so caches can evict it. */
  async revoke(userId: string, id: string): Promise<string | undefined> {
    return this.knex.transaction(async (trx) => {
      const row = (await trx('api_keys').where({ id, user_id: userId }).first('key_hash')) as Pick<Row, 'key_hash'> | undefined;
      if (!row) return undefined;
      await trx('api_keys').where({ id, user_id: userId }).delete();
      return row.key_hash;
    });
  }

  async touch(id: string, now: number): Promise<void> {
    await this.knex('api_keys').where({ id }).update({ last_used_at: isoNow(now) });
  }
}
