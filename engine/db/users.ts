// Users: one row per identity-provider subject, created the first time the user does something that needs a row.
import type { Knex } from 'knex';
import type { VersionedWrites } from '../cache/data-versions.js';
import { bool, isoNow } from './store.js';
import { select } from './prepared.js';

/**
 * The memory gate is part of the user's versioned data: changing it goes through `versions`. `ensure` does not: it
 * never changes an existing row, and what the gate found for an account without a row is never reused
 * (http/routes/memories.ts), so creating the row invalidates nothing.
 */
export class UsersRepository {
  constructor(
    private readonly knex: Knex,
    private readonly versions: VersionedWrites,
  ) {}

  /**
   * Creates the user row if missing; safe to call concurrently.
   * @param memoryAccess - the deployment default (MEMORY_ACCESS_DEFAULT) for a new account's memory gate
   */
  async ensure(uid: string, now: number, memoryAccess = false): Promise<void> {
    await this.knex('users').insert({ id: uid, created_at: isoNow(now), memory_access_enabled: memoryAccess }).onConflict('id').ignore();
  }

  /** Sets the developer memory readiness gate of one account (creating the account row if needed). */
  async setMemoryAccess(uid: string, enabled: boolean, now: number): Promise<void> {
    await this.versions.write(uid, async () => {
      await this.ensure(uid, now, enabled);
      await this.knex('users').where({ id: uid }).update({ memory_access_enabled: enabled });
    });
  }

  /** Read by the memory gate whenever the account's data version changed: a kept statement, not the query builder. */
  async get(uid: string): Promise<{ id: string; createdAt: string; memoryAccessEnabled: boolean } | undefined> {
    const [row] = await select<{ id: string; created_at: string; memory_access_enabled: unknown }>(this.knex, 'select id, created_at, memory_access_enabled from users where id = ?', [uid]);
    return row ? { id: row.id, createdAt: row.created_at, memoryAccessEnabled: bool(row.memory_access_enabled) } : undefined;
  }
}
