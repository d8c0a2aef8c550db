// Standalone action items: list with filters, create, batch create, update, delete (docs/developer-data.md).
import { Type } from '@sinclair/typebox';
import { type ActionItemPatch, type ActionItemRecord, type NewActionItem } from '../../engine/db/action-items.js';
import type { AppRoute, Services } from './types.js';
import { DateBound, Limit, Offset, SUCCESS, SuccessSchema, boundToUtcIso, notFound, pagingHeaders, requireSomeField, splitPage, toUtcIso } from './common.js';

/** Most action items one page holds; a larger `limit` is served in pages of this size (the compatible system sets no bound). */
export const MAX_ACTION_ITEMS_PAGE = 500;
/** Default `limit` of the action item list, as in the compatible system. */
export const DEFAULT_ACTION_ITEMS_PAGE = 100;
/** Action items per batch create, the public limit. */
export const MAX_ACTION_ITEMS_BATCH = 50;
/** Longest description, in characters. */
export const MAX_DESCRIPTION_CHARS = 500;

const DateTime = Type.String({ format: 'date-time', description: 'ISO 8601 date-time; without an offset it is UTC' });
const Description = Type.String({ minLength: 1, maxLength: MAX_DESCRIPTION_CHARS });
const DueAt = Type.Union([DateTime, Type.Null()], { description: 'ISO 8601 date-time (UTC without an offset); stored and shown in UTC; null: no due date' });

export const ActionItemSchema = Type.Object({
  id: Type.String(),
  description: Type.String(),
  completed: Type.Boolean(),
  created_at: Type.String({ format: 'date-time' }),
  updated_at: Type.String({ format: 'date-time' }),
  due_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
  completed_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
  conversation_id: Type.Union([Type.String(), Type.Null()], { description: 'the conversation it was extracted from; null when written through this API' }),
}, { title: 'ActionItem', description: 'a task or to-do of the user' });

const CreateItem = Type.Object({
  description: Description,
  completed: Type.Optional(Type.Boolean({ default: false })),
  due_at: Type.Optional(DueAt),
}, { title: 'CreateActionItem', description: 'a new action item' });

const BatchBody = Type.Object({ action_items: Type.Array(CreateItem, { maxItems: MAX_ACTION_ITEMS_BATCH }) }, { title: 'CreateActionItemsBatch', description: `up to ${MAX_ACTION_ITEMS_BATCH} new action items, created all or none` });
const BatchResult = Type.Object({ action_items: Type.Array(ActionItemSchema), created_count: Type.Integer() }, { title: 'ActionItemsBatchResult', description: 'the action items created, in request order' });

const PATCH_FIELDS = ['description', 'completed', 'due_at'] as const;
const UpdateItem = Type.Object({
  description: Type.Optional(Description),
  completed: Type.Optional(Type.Boolean({ description: 'true sets completed_at (keeping the first completion time); false clears it' })),
  due_at: Type.Optional(DueAt),
}, { title: 'UpdateActionItem', description: 'the fields to change; at least one' });

const ListQuery = Type.Object({
  completed: Type.Optional(Type.Boolean({ description: 'true: completed only; false: open only; omitted: both' })),
  conversation_id: Type.Optional(Type.String()),
  start_date: Type.Optional(DateBound('created at or after; a bare date means its 00:00 UTC')),
  end_date: Type.Optional(DateBound('created at or before; a bare date means the end of that UTC day')),
  limit: Limit(DEFAULT_ACTION_ITEMS_PAGE, MAX_ACTION_ITEMS_PAGE),
  offset: Offset(),
});

export function view(i: ActionItemRecord): Record<string, unknown> {
  return {
    id: i.id,
    description: i.description,
    completed: i.completed,
    created_at: i.createdAt,
    updated_at: i.updatedAt,
    due_at: i.dueAt,
    completed_at: i.completedAt,
    conversation_id: i.conversationId,
  };
}

function toNew(b: { description: string; completed?: boolean; due_at?: string | null }): NewActionItem {
  return { description: b.description, completed: b.completed ?? false, dueAt: b.due_at ? toUtcIso(b.due_at) : null };
}

export function actionItemRoutes(s: Services): AppRoute[] {
  const items = s.actionItems;
  const tags = ['Action items'];
  return [
    {
      method: 'get',
      path: '/v1/dev/user/action-items',
      operationId: 'listActionItems',
      summary: `List action items (scope action_items:read), newest first; limit ${DEFAULT_ACTION_ITEMS_PAGE} by default, at most ${MAX_ACTION_ITEMS_PAGE} per page`,
      description: 'Ordered by created_at descending, ties by id descending. start_date and end_date bound created_at, both inclusive.',
      tags,
      auth: { kind: 'api_key', scope: 'action_items:read' },
      cacheable: true,
      query: ListQuery,
      responses: { 200: { description: 'the action items', schema: Type.Array(ActionItemSchema, { title: 'ActionItemList', description: 'a page of action items, newest first' }) } },
      async handler({ auth, query }) {
        const start = query.start_date as string | undefined;
        const end = query.end_date as string | undefined;
        const limit = Math.min(query.limit as number, MAX_ACTION_ITEMS_PAGE);
        const rows = await items.list(auth.uid, {
          ...(query.completed !== undefined ? { completed: query.completed as boolean } : {}),
          ...(query.conversation_id !== undefined ? { conversationId: query.conversation_id as string } : {}),
          ...(start !== undefined ? { createdFrom: boundToUtcIso(start, false) } : {}),
          ...(end !== undefined ? { createdTo: boundToUtcIso(end, true) } : {}),
          limit: limit + 1,
          offset: query.offset as number,
        });
        const page = splitPage(rows, limit);
        return { body: page.items.map(view), headers: pagingHeaders('/v1/dev/user/action-items', query, limit, page.more) };
      },
    },
    {
      method: 'post',
      path: '/v1/dev/user/action-items',
      operationId: 'createActionItem',
      summary: 'Create an action item (scope action_items:write); completed defaults to false, due_at to none',
      tags,
      auth: { kind: 'api_key', scope: 'action_items:write' },
      body: CreateItem,
      responses: { 200: { description: 'the new action item', schema: ActionItemSchema } },
      async handler({ auth, body }) {
        const item = await items.create(auth.uid, toNew(body), s.clock.now());
        s.logger.info({ actionItemId: item.id }, 'action item created');
        return { body: view(item) };
      },
    },
    {
      method: 'post',
      path: '/v1/dev/user/action-items/batch',
      operationId: 'createActionItemsBatch',
      summary: `Create up to ${MAX_ACTION_ITEMS_BATCH} action items at once (scope action_items:write); all or nothing`,
      tags,
      auth: { kind: 'api_key', scope: 'action_items:write' },
      body: BatchBody,
      responses: { 200: { description: 'the new action items, in request order', schema: BatchResult } },
      async handler({ auth, body }) {
        const created = await items.createMany(auth.uid, (body.action_items as Parameters<typeof toNew>[0][]).map(toNew), s.clock.now());
        return { body: { action_items: created.map(view), created_count: created.length } };
      },
    },
    {
      method: 'patch',
      path: '/v1/dev/user/action-items/{action_item_id}',
      operationId: 'updateActionItem',
      summary: 'Update an action item’s description, completed flag or due_at (scope action_items:write); at least one is required',
      tags,
      auth: { kind: 'api_key', scope: 'action_items:write' },
      body: UpdateItem,
      responses: { 200: { description: 'the updated action item', schema: ActionItemSchema }, 404: { description: 'no such action item of yours' } },
      async handler({ auth, params, body }) {
        requireSomeField(body, PATCH_FIELDS);
        const patch: ActionItemPatch = {};
        if (body.description !== undefined) patch.description = body.description as string;
        if (body.completed !== undefined) patch.completed = body.completed as boolean;
        if (body.due_at !== undefined) patch.dueAt = body.due_at === null ? null : toUtcIso(body.due_at as string);
        const item = await items.update(auth.uid, params.action_item_id!, patch, s.clock.now());
        if (!item) throw notFound('Action item');
        return { body: view(item) };
      },
    },
    {
      method: 'delete',
      path: '/v1/dev/user/action-items/{action_item_id}',
      operationId: 'deleteActionItem',
      summary: 'Delete an action item (scope action_items:write)',
      tags,
      auth: { kind: 'api_key', scope: 'action_items:write' },
      responses: { 200: { description: 'deleted', schema: SuccessSchema }, 404: { description: 'no such action item of yours' } },
      async handler({ auth, params }) {
        if (!(await items.delete(auth.uid, params.action_item_id!))) throw notFound('Action item');
        return { body: SUCCESS };
      },
    },
  ];
}
