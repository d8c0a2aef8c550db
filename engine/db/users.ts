// Users: one row per identity-provider subject, created the first time the user does something that needs a row.
import type { Knex } from 'knex';
import { bool, isoNow } from './store.js';

export class UsersRepository {
  constructor(private readonly knex: Knex) {}

  /** Creates the user row if missing; safe to call concurrently. */
  async ensure(uid: string, now: number): Promise<void> {
    await this.knex('users').insert({ id: uid, created_at: isoNow(now), memory_access_enabled: false }).onConflict('id').ignore();
  }

  async get(uid: string): Promise<{ id: string; createdAt: string; memoryAccessEnabled: boolean } | undefined> {
    const row = await this.knex('users').where({ id: uid }).first();
    return row ? { id: row.id, createdAt: row.created_at, memoryAccessEnabled: bool(row.memory_access_enabled) } : undefined;
  }
}
