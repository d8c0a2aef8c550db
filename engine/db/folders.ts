// Folders that group a user's conversations: names unique per user; deleting one leaves its conversations folderless.
import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import { isoNow } from './store.js';

export interface FolderRecord {
  id: string;
  userId: string;
  name: string;
  createdAt: string;
  updatedAt: string;
  /** Conversations in the folder that are not deleted. */
  conversationCount: number;
}

interface Row {
  id: string;
  user_id: string;
  name: string;
  created_at: string;
  updated_at: string;
  conversation_count?: number | string;
}

const toRecord = (r: Row): FolderRecord => ({
  id: r.id,
  userId: r.user_id,
  name: r.name,
  createdAt: r.created_at,
  updatedAt: r.updated_at,
  // PostgreSQL returns count(*) as a string (bigint).
  conversationCount: Number(r.conversation_count ?? 0),
});

export class FoldersRepository {
  constructor(private readonly knex: Knex) {}

  #withCount(): Knex.QueryBuilder {
    const count = this.knex('conversations as c').count('*').whereRaw('c.folder_id = f.id').andWhere('c.deleted', false).as('conversation_count');
    return this.knex('folders as f').select('f.*', count);
  }

  /** Oldest first, ties by id. */
  async list(userId: string): Promise<FolderRecord[]> {
    const rows = (await this.#withCount().where('f.user_id', userId).orderBy([{ column: 'f.created_at' }, { column: 'f.id' }])) as Row[];
    return rows.map(toRecord);
  }

  async get(userId: string, id: string): Promise<FolderRecord | undefined> {
    const row = (await this.#withCount().where({ 'f.user_id': userId, 'f.id': id }).first()) as Row | undefined;
    return row ? toRecord(row) : undefined;
  }

  async nameTaken(userId: string, name: string, exceptId?: string): Promise<boolean> {
    const q = this.knex('folders').where({ user_id: userId, name });
    if (exceptId) q.whereNot({ id: exceptId });
    return (await q.first('id')) !== undefined;
  }

  async create(userId: string, name: string, now: number): Promise<FolderRecord> {
    const at = isoNow(now);
    const row: Row = { id: randomUUID(), user_id: userId, name, created_at: at, updated_at: at };
    await this.knex('folders').insert(row);
    return toRecord({ ...row, conversation_count: 0 });
  }

  async rename(userId: string, id: string, name: string, now: number): Promise<boolean> {
    return (await this.knex('folders').where({ id, user_id: userId }).update({ name, updated_at: isoNow(now) })) > 0;
  }

  /** Deletes the folder; its conversations stay, without a folder. */
  async delete(userId: string, id: string, now: number): Promise<boolean> {
    return this.knex.transaction(async (trx) => {
      await trx('conversations').where({ user_id: userId, folder_id: id }).update({ folder_id: null, updated_at: isoNow(now) });
      return (await trx('folders').where({ id, user_id: userId }).delete()) > 0;
    });
  }
}
