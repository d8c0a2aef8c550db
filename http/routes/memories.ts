// Memories: list, create, batch create, update, delete; every route behind the memory readiness gate.
import { Type } from '@sinclair/typebox';
import { EngineError } from '../../engine/errors.js';
import {
  MEMORY_CATEGORIES,
  MEMORY_VISIBILITIES,
  isMemoryCategory,
  type MemoryCategory,
  type MemoryPatch,
  type MemoryRecord,
  type NewMemory,
} from '../../engine/db/memories.js';
import type { Principal } from '../../engine/identity/authenticator.js';
import { VersionedCache } from '../../engine/cache/versioned-cache.js';
import type { AppRoute, Services } from './types.js';
import { Limit, Offset, SUCCESS, StringEnum, SuccessSchema, notFound, pagingHeaders, requireSomeField } from './common.js';

/** Most memories one page holds; a larger `limit` is served in pages of this size (the compatible system sets no bound). */
export const MAX_MEMORIES_PAGE = 500;
/** Default `limit` of the memory list, as in the compatible system. */
export const DEFAULT_MEMORIES_PAGE = 25;
/** Memories per batch create, the public limit. */
export const MAX_MEMORIES_BATCH = 25;
/** Longest memory content, in characters. */
export const MAX_MEMORY_CHARS = 500;
/** Tags per memory and characters per tag (our bounds; the public API names none). */
export const MAX_TAGS = 50;
export const MAX_TAG_CHARS = 100;
/** Category of a memory created without one. The compatible system asks an LLM; this service does not classify. */
export const DEFAULT_MEMORY_CATEGORY: MemoryCategory = 'other';

const Category = StringEnum(MEMORY_CATEGORIES, { title: 'MemoryCategory', description: 'what kind of fact a memory is' });
const Visibility = StringEnum(MEMORY_VISIBILITIES, { title: 'MemoryVisibility' });
const Content = Type.String({ minLength: 1, maxLength: MAX_MEMORY_CHARS });
const Tags = Type.Array(Type.String({ minLength: 1, maxLength: MAX_TAG_CHARS }), { maxItems: MAX_TAGS });

export const MemorySchema = Type.Object({
  id: Type.String(),
  content: Type.String(),
  category: Category,
  visibility: Visibility,
  tags: Type.Array(Type.String()),
  created_at: Type.String({ format: 'date-time' }),
  updated_at: Type.String({ format: 'date-time' }),
  manually_added: Type.Boolean({ description: 'true when written through this API, false when extracted from a conversation' }),
}, { title: 'Memory', description: 'a fact, preference or insight about the user' });

const CreateMemory = Type.Object({
  content: Content,
  category: Type.Optional(Type.Union([Category, Type.Null()], { description: `omitted or null: ${DEFAULT_MEMORY_CATEGORY}` })),
  visibility: Type.Optional(StringEnum(MEMORY_VISIBILITIES, { default: 'private' })),
  tags: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: MAX_TAG_CHARS }), { maxItems: MAX_TAGS, default: [] })),
}, { title: 'CreateMemory', description: 'a new memory' });

const BatchBody = Type.Object({ memories: Type.Array(CreateMemory, { maxItems: MAX_MEMORIES_BATCH }) }, { title: 'CreateMemoriesBatch', description: `up to ${MAX_MEMORIES_BATCH} new memories, created all or none` });
const BatchResult = Type.Object({ memories: Type.Array(MemorySchema), created_count: Type.Integer() }, { title: 'MemoriesBatchResult', description: 'the memories created, in request order' });

const PATCH_FIELDS = ['content', 'category', 'visibility', 'tags'] as const;
const UpdateMemory = Type.Object({
  content: Type.Optional(Content),
  category: Type.Optional(Category),
  visibility: Type.Optional(Visibility),
  tags: Type.Optional(Tags),
}, { title: 'UpdateMemory', description: 'the fields to change; at least one' });

const ListQuery = Type.Object({
  limit: Limit(DEFAULT_MEMORIES_PAGE, MAX_MEMORIES_PAGE),
  offset: Offset(),
  categories: Type.Optional(Type.String({ description: `comma-separated; each one of ${MEMORY_CATEGORIES.join(', ')}` })),
});

const NOT_READY = {
  403: { description: 'missing scope, or the account is not enabled for the developer memory interface (detail.code developer_memory_access_not_ready)' },
};

export function view(m: MemoryRecord): Record<string, unknown> {
  return {
    id: m.id,
    content: m.content,
    category: m.category,
    visibility: m.visibility,
    tags: m.tags,
    created_at: m.createdAt,
    updated_at: m.updatedAt,
    manually_added: m.manuallyAdded,
  };
}

function toNew(b: { content: string; category?: MemoryCategory | null; visibility?: NewMemory['visibility']; tags?: string[] }): NewMemory {
  return { content: b.content, category: b.category ?? DEFAULT_MEMORY_CATEGORY, visibility: b.visibility ?? 'private', tags: b.tags ?? [] };
}

/** Parses the `categories` filter; 400 naming the first unknown value. Blank items are ignored. */
function parseCategories(raw: string | undefined): MemoryCategory[] {
  if (raw === undefined) return [];
  const out: MemoryCategory[] = [];
  for (const part of raw.split(',')) {
    const c = part.trim();
    if (c === '') continue;
    if (!isMemoryCategory(c)) throw new EngineError('ENG_ERR_CATEGORY_INVALID', { category: c, valid: MEMORY_CATEGORIES.join(', ') });
    if (!out.includes(c)) out.push(c);
  }
  return out;
}

/** Accounts whose gate state each node remembers (per data version). */
const MAX_REMEMBERED_GATES = 100_000;

/** The account's gate; `stored` is false for an account without a users row (the deployment default applies). */
async function memoryAccess(s: Services, uid: string): Promise<{ enabled: boolean; stored: boolean }> {
  const user = await s.users.get(uid);
  return user ? { enabled: user.memoryAccessEnabled, stored: true } : { enabled: s.config.memoryAccessDefault === 'enabled', stored: false };
}

/**
 * The account-level readiness gate (docs/developer-data.md), checked after the key and its scope: a valid, correctly
 * scoped key still gets 403 while the account is not enabled. An account without a users row gets the deployment default.
 * The MCP tools check the same gate.
 */
export async function checkMemoryAccess(s: Services, uid: string): Promise<void> {
  if (!(await memoryAccess(s, uid)).enabled) throw memoryAccessNotReady();
}

function memoryAccessNotReady(): EngineError {
  return new EngineError('ENG_ERR_MEMORY_ACCESS_NOT_READY', {}, {
    detail: {
      code: 'developer_memory_access_not_ready',
      reason: 'missing_rollout_state',
      message: 'Developer memory access is not enabled for this account yet. The API key can be valid and correctly scoped; ask the operator to enable memory access for the account.',
    },
  });
}

/**
 * The gate of the memory routes: remembers a stored gate state per account and data version (the gate is versioned
 * data, engine/db/users.ts), so a request whose version is unchanged needs no store read. Without a version (a write
 * in flight), or for an account without a row, it asks the store.
 */
function versionedMemoryGate(s: Services): (auth: Principal, dataVersion: string | undefined) => Promise<void> | void {
  const known = new VersionedCache<boolean>(MAX_REMEMBERED_GATES);
  const check = async (uid: string, dataVersion: string | undefined): Promise<void> => {
    const found = await memoryAccess(s, uid);
    if (found.stored && dataVersion !== undefined) known.set(uid, dataVersion, found.enabled);
    if (!found.enabled) throw memoryAccessNotReady();
  };
  return (auth, dataVersion) => {
    const enabled = dataVersion === undefined ? undefined : known.get(auth.uid, dataVersion);
    if (enabled === undefined) return check(auth.uid, dataVersion);
    if (!enabled) throw memoryAccessNotReady();
    return undefined;
  };
}

export function memoryRoutes(s: Services): AppRoute[] {
  const memories = s.memories;
  const memoryGate = versionedMemoryGate(s);

  const tags = ['Memories'];
  return [
    {
      method: 'get',
      path: '/v1/dev/user/memories',
      operationId: 'listMemories',
      summary: `List memories (scope memories:read), newest first; limit ${DEFAULT_MEMORIES_PAGE} by default, at most ${MAX_MEMORIES_PAGE} per page`,
      description: 'Ordered by created_at descending, ties by id descending, so pages are stable. `categories` filters by any of the listed categories; an unknown one answers 400.',
      tags,
      auth: { kind: 'api_key', scope: 'memories:read' },
      guard: memoryGate,
      cacheable: true,
      query: ListQuery,
      responses: { 200: { description: 'the memories', schema: Type.Array(MemorySchema, { title: 'MemoryList', description: 'a page of memories, newest first' }) }, 400: { description: 'unknown category' }, ...NOT_READY },
      async handler({ auth, query }) {
        const categories = parseCategories(query.categories as string | undefined);
        const limit = Math.min(query.limit as number, MAX_MEMORIES_PAGE);
        const page = await memories.pageJson(auth.uid, { limit, offset: query.offset as number, categories });
        return { json: page.json, headers: pagingHeaders('/v1/dev/user/memories', query, limit, page.more) };
      },
    },
    {
      method: 'post',
      path: '/v1/dev/user/memories',
      operationId: 'createMemory',
      summary: `Create a memory (scope memories:write); category defaults to ${DEFAULT_MEMORY_CATEGORY}, visibility to private, tags to []`,
      tags,
      auth: { kind: 'api_key', scope: 'memories:write' },
      guard: memoryGate,
      body: CreateMemory,
      responses: { 200: { description: 'the new memory', schema: MemorySchema }, ...NOT_READY },
      async handler({ auth, body }) {
        const m = await memories.create(auth.uid, toNew(body), s.clock.now());
        s.logger.info({ memoryId: m.id }, 'memory created');
        return { body: view(m) };
      },
    },
    {
      method: 'post',
      path: '/v1/dev/user/memories/batch',
      operationId: 'createMemoriesBatch',
      summary: `Create up to ${MAX_MEMORIES_BATCH} memories at once (scope memories:write); all or nothing`,
      description: 'Every memory is validated before any is written; one invalid memory or too many refuses the whole batch with 422.',
      tags,
      auth: { kind: 'api_key', scope: 'memories:write' },
      guard: memoryGate,
      body: BatchBody,
      responses: { 200: { description: 'the new memories, in request order', schema: BatchResult }, ...NOT_READY },
      async handler({ auth, body }) {
        const created = await memories.createMany(auth.uid, (body.memories as Parameters<typeof toNew>[0][]).map(toNew), s.clock.now());
        return { body: { memories: created.map(view), created_count: created.length } };
      },
    },
    {
      method: 'patch',
      path: '/v1/dev/user/memories/{memory_id}',
      operationId: 'updateMemory',
      summary: 'Update a memory’s content, category, visibility or tags (scope memories:write); at least one is required',
      tags,
      auth: { kind: 'api_key', scope: 'memories:write' },
      guard: memoryGate,
      body: UpdateMemory,
      responses: { 200: { description: 'the updated memory', schema: MemorySchema }, 404: { description: 'no such memory of yours' }, ...NOT_READY },
      async handler({ auth, params, body }) {
        requireSomeField(body, PATCH_FIELDS);
        const m = await memories.update(auth.uid, params.memory_id!, body as MemoryPatch, s.clock.now());
        if (!m) throw notFound('Memory');
        return { body: view(m) };
      },
    },
    {
      method: 'delete',
      path: '/v1/dev/user/memories/{memory_id}',
      operationId: 'deleteMemory',
      summary: 'Delete a memory (scope memories:write)',
      tags,
      auth: { kind: 'api_key', scope: 'memories:write' },
      guard: memoryGate,
      responses: { 200: { description: 'deleted', schema: SuccessSchema }, 404: { description: 'no such memory of yours' }, ...NOT_READY },
      async handler({ auth, params }) {
        if (!(await memories.delete(auth.uid, params.memory_id!))) throw notFound('Memory');
        return { body: SUCCESS };
      },
    },
  ];
}
