// Memories: timeless facts about a user, written through the developer API or extracted from conversations.
import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import type { VersionedWrites } from '../cache/data-versions.js';
import { bool, isoNow, type Dialect } from './store.js';
import { execute, insertStatements, runInserts, select, writeTransaction, type RowValue } from './prepared.js';

/** Memory categories of the public API, exact strings. */
export const MEMORY_CATEGORIES = ['core', 'hobbies', 'lifestyle', 'interests', 'habits', 'work', 'skills', 'learnings', 'other', 'system'] as const;
export type MemoryCategory = (typeof MEMORY_CATEGORIES)[number];

export const MEMORY_VISIBILITIES = ['public', 'private'] as const;
export type MemoryVisibility = (typeof MEMORY_VISIBILITIES)[number];

export const isMemoryCategory = (v: string): v is MemoryCategory => (MEMORY_CATEGORIES as readonly string[]).includes(v);

export interface MemoryRecord {
  id: string;
  userId: string;
  content: string;
  category: MemoryCategory;
  visibility: MemoryVisibility;
  tags: string[];
  /** True when written through the API, false when extracted from a conversation. */
  manuallyAdded: boolean;
  conversationId: string | null;
  createdAt: string;
  updatedAt: string;
}

export interface NewMemory {
  content: string;
  category: MemoryCategory;
  visibility: MemoryVisibility;
  tags: string[];
}

export type MemoryPatch = Partial<NewMemory>;

interface Row {
  id: string;
  user_id: string;
  content: string;
  category: string;
  visibility: string;
  tags: string;
  manually_added: unknown;
  conversation_id: string | null;
  created_at: string;
  updated_at: string;
}

const toRecord = (r: Row): MemoryRecord => ({
  id: r.id,
  userId: r.user_id,
  content: r.content,
  category: r.category as MemoryCategory,
  visibility: r.visibility as MemoryVisibility,
  tags: JSON.parse(r.tags) as string[],
  manuallyAdded: bool(r.manually_added),
  conversationId: r.conversation_id,
  createdAt: r.created_at,
  updatedAt: r.updated_at,
});

function newRow(userId: string, m: NewMemory, manuallyAdded: boolean, conversationId: string | null, now: number): Row {
  const at = isoNow(now);
  return {
    id: randomUUID(),
    user_id: userId,
    content: m.content,
    category: m.category,
    visibility: m.visibility,
    tags: JSON.stringify(m.tags),
    manually_added: manuallyAdded,
    conversation_id: conversationId,
    created_at: at,
    updated_at: at,
  };
}

const COLUMNS = ['id', 'user_id', 'content', 'category', 'visibility', 'tags', 'manually_added', 'conversation_id', 'created_at', 'updated_at'] as const;
/** Each row's values in COLUMNS order (insertStatements(), runInserts()). */
const values = (rows: readonly Row[]): RowValue[][] => rows.map((r) => COLUMNS.map((c) => r[c] as RowValue));

/** One memory as the developer view's JSON object, in the view's key order. */
const VIEW_JSON: Record<Dialect, string> = {
  sqlite:
    "json_object('id', id, 'content', content, 'category', category, 'visibility', visibility, 'tags', json(tags), 'created_at', created_at, " +
    "'updated_at', updated_at, 'manually_added', json(case when manually_added then 'true' else 'false' end))",
  pg:
    "json_build_object('id', id, 'content', content, 'category', category, 'visibility', visibility, 'tags', tags::json, 'created_at', created_at, " +
    "'updated_at', updated_at, 'manually_added', manually_added)::text",
};

/** Every write goes through `versions`, so nodes caching answers about the user's memories hear of it. */
export class MemoriesRepository {
  constructor(
    private readonly knex: Knex,
    private readonly dialect: Dialect,
    private readonly versions: VersionedWrites,
  ) {}

  /** Newest first; ties (one batch shares a timestamp) broken by id so pages never overlap or skip. */
  async list(userId: string, opts: { limit: number; offset: number; categories?: readonly MemoryCategory[] }): Promise<MemoryRecord[]> {
    const q = this.knex('memories').where({ user_id: userId });
    if (opts.categories && opts.categories.length > 0) q.whereIn('category', opts.categories as MemoryCategory[]);
    const rows = (await q
      .orderBy([{ column: 'created_at', order: 'desc' }, { column: 'id', order: 'desc' }])
      .limit(opts.limit)
      .offset(opts.offset)) as Row[];
    return rows.map(toRecord);
  }

  /**
   * The same page as `list`, already serialised as the developer view (http/routes/memories.ts `view`): the store
   * builds each memory's JSON, so the hottest read creates no row objects. A test keeps both forms equal.
   */
  async listJson(userId: string, opts: { limit: number; offset: number; categories?: readonly MemoryCategory[] }): Promise<string> {
    return (await this.pageJson(userId, opts)).json;
  }

  /** listJson's page, and whether more memories follow it (one row past the page is read to know). */
  async pageJson(userId: string, opts: { limit: number; offset: number; categories?: readonly MemoryCategory[] }): Promise<{ json: string; more: boolean }> {
    const categories = opts.categories ?? [];
    const filter = categories.length > 0 ? ` and category in (${categories.map(() => '?').join(', ')})` : '';
    const sql = `select ${VIEW_JSON[this.dialect]} as j from memories where user_id = ?${filter} order by created_at desc, id desc limit ? offset ?`;
    const rows = await select<{ j: string }>(this.knex, sql, [userId, ...categories, opts.limit + 1, opts.offset]);
    const n = Math.min(rows.length, opts.limit);
    let out = '[';
    for (let i = 0; i < n; i++) out += (i === 0 ? '' : ',') + rows[i]!.j;
    return { json: out + ']', more: rows.length > opts.limit };
  }

  async get(userId: string, id: string): Promise<MemoryRecord | undefined> {
    const row = (await this.knex('memories').where({ id, user_id: userId }).first()) as Row | undefined;
    return row ? toRecord(row) : undefined;
  }

  /** Inserts every memory, all or nothing: one statement alone, or several in a transaction (insertStatements()). */
  async createMany(userId: string, memories: readonly NewMemory[], now: number): Promise<MemoryRecord[]> {
    if (memories.length === 0) return [];
    const rows = memories.map((m) => newRow(userId, m, true, null, now));
    const statements = insertStatements(this.dialect === 'sqlite', 'memories', COLUMNS, values(rows));
    await this.versions.write(userId, async () => {
      if (statements.length === 1) await execute(this.knex, ...statements[0]!);
      else await writeTransaction(this.knex, async (run) => {
        for (const [sql, bindings] of statements) await run(sql, bindings);
      });
    });
    return rows.map(toRecord);
  }

  async create(userId: string, memory: NewMemory, now: number): Promise<MemoryRecord> {
    const [record] = await this.createMany(userId, [memory], now);
    return record!;
  }

  /**
   * Stores memories the conversation processor extracted; called by its integration, not by a route.
   * A category outside the enumeration is stored as `other`; visibility is private and tags empty.
   * Replaces what an earlier run derived from the same conversation, so processing twice gives the same rows.
   */
  async createFromConversation(userId: string, conversationId: string, memories: { content: string; category: string }[], now: number): Promise<void> {
    const rows = memories.map((m) =>
      newRow(userId, { content: m.content, category: isMemoryCategory(m.category) ? m.category : 'other', visibility: 'private', tags: [] }, false, conversationId, now),
    );
    // Kept statements in one transaction (prepared.ts): knex would prepare, run and finalise each query through the
    // thread pool, a cost every processed conversation pays on the main thread.
    await this.versions.write(userId, () =>
      writeTransaction(this.knex, async (run) => {
        await run('DELETE FROM memories WHERE user_id = ? AND conversation_id = ? AND manually_added = ?', [userId, conversationId, false]);
        await runInserts(run, 'memories', COLUMNS, values(rows));
      }),
    );
  }

  /** Applies the given fields; undefined when the memory is not the user's. */
  async update(userId: string, id: string, patch: MemoryPatch, now: number): Promise<MemoryRecord | undefined> {
    const changes: Partial<Row> = { updated_at: isoNow(now) };
    if (patch.content !== undefined) changes.content = patch.content;
    if (patch.category !== undefined) changes.category = patch.category;
    if (patch.visibility !== undefined) changes.visibility = patch.visibility;
    if (patch.tags !== undefined) changes.tags = JSON.stringify(patch.tags);
    const n = await this.versions.write(userId, () => this.knex('memories').where({ id, user_id: userId }).update(changes));
    return n > 0 ? this.get(userId, id) : undefined;
  }

  /** True when a memory of the user's was deleted. */
  async delete(userId: string, id: string): Promise<boolean> {
    return (await this.versions.write(userId, () => this.knex('memories').where({ id, user_id: userId }).delete())) > 0;
  }
}
