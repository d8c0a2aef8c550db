// Standalone action items: tasks written through the developer API or extracted from conversations.
import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import type { VersionedWrites } from '../cache/data-versions.js';
import { bool, isoNow } from './store.js';
import { runInserts, writeTransaction, type RowValue } from './prepared.js';

export interface ActionItemRecord {
  id: string;
  userId: string;
  description: string;
  completed: boolean;
  /** ISO 8601 UTC, or null. */
  dueAt: string | null;
  completedAt: string | null;
  conversationId: string | null;
  createdAt: string;
  updatedAt: string;
}

export interface NewActionItem {
  description: string;
  completed: boolean;
  /** ISO 8601 UTC, or null. */
  dueAt: string | null;
}

export interface ActionItemPatch {
  description?: string;
  completed?: boolean;
  /** null clears the due date. */
  dueAt?: string | null;
}

export interface ActionItemFilter {
  completed?: boolean;
  conversationId?: string;
  /** Inclusive bounds on created_at, ISO 8601 UTC. */
  createdFrom?: string;
  createdTo?: string;
  limit: number;
  offset: number;
}

interface Row {
  id: string;
  user_id: string;
  description: string;
  completed: unknown;
  due_at: string | null;
  completed_at: string | null;
  conversation_id: string | null;
  created_at: string;
  updated_at: string;
}

const toRecord = (r: Row): ActionItemRecord => ({
  id: r.id,
  userId: r.user_id,
  description: r.description,
  completed: bool(r.completed),
  dueAt: r.due_at,
  completedAt: r.completed_at,
  conversationId: r.conversation_id,
  createdAt: r.created_at,
  updatedAt: r.updated_at,
});

function newRow(userId: string, item: NewActionItem, conversationId: string | null, now: number): Row {
  const at = isoNow(now);
  return {
    id: randomUUID(),
    user_id: userId,
    description: item.description,
    completed: item.completed,
    due_at: item.dueAt,
    completed_at: item.completed ? at : null,
    conversation_id: conversationId,
    created_at: at,
    updated_at: at,
  };
}

const COLUMNS = ['id', 'user_id', 'description', 'completed', 'due_at', 'completed_at', 'conversation_id', 'created_at', 'updated_at'] as const;

/** Every write goes through `versions`, so nodes caching answers about the user's action items hear of it. */
export class ActionItemsRepository {
  constructor(
    private readonly knex: Knex,
    private readonly versions: VersionedWrites,
  ) {}

  /** Newest first, ties broken by id. */
  async list(userId: string, f: ActionItemFilter): Promise<ActionItemRecord[]> {
    const q = this.knex('action_items').where({ user_id: userId });
    if (f.completed !== undefined) q.andWhere('completed', f.completed);
    if (f.conversationId !== undefined) q.andWhere('conversation_id', f.conversationId);
    if (f.createdFrom !== undefined) q.andWhere('created_at', '>=', f.createdFrom);
    if (f.createdTo !== undefined) q.andWhere('created_at', '<=', f.createdTo);
    const rows = (await q
      .orderBy([{ column: 'created_at', order: 'desc' }, { column: 'id', order: 'desc' }])
      .limit(f.limit)
      .offset(f.offset)) as Row[];
    return rows.map(toRecord);
  }

  async get(userId: string, id: string): Promise<ActionItemRecord | undefined> {
    const row = (await this.knex('action_items').where({ id, user_id: userId }).first()) as Row | undefined;
    return row ? toRecord(row) : undefined;
  }

  /** Inserts every item in one statement, which is all or nothing by itself. */
  async createMany(userId: string, items: readonly NewActionItem[], now: number): Promise<ActionItemRecord[]> {
    if (items.length === 0) return [];
    const rows = items.map((i) => newRow(userId, i, null, now));
    await this.versions.write(userId, () => this.knex('action_items').insert(rows));
    return rows.map(toRecord);
  }

  async create(userId: string, item: NewActionItem, now: number): Promise<ActionItemRecord> {
    const [record] = await this.createMany(userId, [item], now);
    return record!;
  }

  /**
   * Stores action items the conversation processor extracted (open, linked to the conversation); called by its integration.
   * Replaces what an earlier run derived from the same conversation, so processing twice gives the same rows.
   */
  async createFromConversation(userId: string, conversationId: string, items: { description: string; dueAt: string | null }[], now: number): Promise<void> {
    const rows = items.map((i) => newRow(userId, { description: i.description, completed: false, dueAt: i.dueAt }, conversationId, now));
    // Kept statements in one transaction, as MemoriesRepository.createFromConversation.
    await this.versions.write(userId, () =>
      writeTransaction(this.knex, async (run) => {
        await run('DELETE FROM action_items WHERE user_id = ? AND conversation_id = ?', [userId, conversationId]);
        await runInserts(run, 'action_items', COLUMNS, rows.map((r) => COLUMNS.map((c) => r[c] as RowValue)));
      }),
    );
  }

  /**
   * Applies the given fields; undefined when the item is not the user's.
   * completed=true sets completed_at to now unless the item was already completed (the first completion time is kept);
   * completed=false clears it.
   */
  async update(userId: string, id: string, patch: ActionItemPatch, now: number): Promise<ActionItemRecord | undefined> {
    return this.versions.write(userId, () => this.#update(userId, id, patch, now));
  }

  #update(userId: string, id: string, patch: ActionItemPatch, now: number): Promise<ActionItemRecord | undefined> {
    return this.knex.transaction(async (trx) => {
      const row = (await trx('action_items').where({ id, user_id: userId }).first()) as Row | undefined;
      if (!row) return undefined;
      const at = isoNow(now);
      const changes: Partial<Row> = { updated_at: at };
      if (patch.description !== undefined) changes.description = patch.description;
      if (patch.dueAt !== undefined) changes.due_at = patch.dueAt;
      if (patch.completed !== undefined) {
        changes.completed = patch.completed;
        changes.completed_at = patch.completed ? (bool(row.completed) && row.completed_at ? row.completed_at : at) : null;
      }
      await trx('action_items').where({ id, user_id: userId }).update(changes);
      return toRecord({ ...row, ...changes });
    });
  }

  async delete(userId: string, id: string): Promise<boolean> {
    return (await this.versions.write(userId, () => this.knex('action_items').where({ id, user_id: userId }).delete())) > 0;
  }
}
