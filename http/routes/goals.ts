// Goals: list, get, create (at most 3 active), update, progress with per-day history, delete.
import { Type } from '@sinclair/typebox';
import { valueError } from '../../engine/errors.js';
import { GOAL_TYPES, MAX_ACTIVE_GOALS, type GoalPatch, type GoalRecord, type GoalType, type NewGoal } from '../../engine/db/goals.js';
import type { AppRoute, Services } from './types.js';
import { SUCCESS, StringEnum, SuccessSchema, notFound, requireSomeField, splitPage } from './common.js';

/** Default `limit` of the goal list, as in the compatible system, and the most active goals one page holds (it sets no bound). */
export const DEFAULT_GOALS_PAGE = 10;
export const MAX_GOALS_PAGE = 100;
/** Default and largest `days` of the history. */
export const DEFAULT_HISTORY_DAYS = 30;
export const MAX_HISTORY_DAYS = 365;
export const MAX_TITLE_CHARS = 500;
export const MAX_UNIT_CHARS = 100;

const Title = Type.String({ minLength: 1, maxLength: MAX_TITLE_CHARS });
const Unit = Type.Union([Type.String({ maxLength: MAX_UNIT_CHARS }), Type.Null()], { description: 'e.g. "km"; null: none' });
const GoalTypeSchema = StringEnum(GOAL_TYPES, { title: 'GoalType' });

export const GoalSchema = Type.Object({
  id: Type.String({ description: 'goal_ followed by 12 hex digits' }),
  title: Type.String(),
  goal_type: GoalTypeSchema,
  target_value: Type.Number(),
  current_value: Type.Number(),
  min_value: Type.Number(),
  max_value: Type.Number(),
  unit: Type.Union([Type.String(), Type.Null()]),
  is_active: Type.Boolean(),
  created_at: Type.String({ format: 'date-time' }),
  updated_at: Type.String({ format: 'date-time' }),
}, { title: 'Goal', description: 'a goal with its target and progress; at most 3 are active' });

const HistoryEntry = Type.Object({
  date: Type.String({ format: 'date', description: 'UTC day' }),
  value: Type.Number({ description: 'the last progress value set that day' }),
  recorded_at: Type.String({ format: 'date-time' }),
}, { title: 'GoalHistoryEntry', description: 'the progress of one UTC day' });

const VALUE_RULES =
  'boolean goals take 0 or 1 for target and current values (min 0, max 1); scale goals need min_value ≤ target_value, current_value ≤ max_value; ' +
  'numeric goals need min_value ≤ max_value only (target and progress are unbounded, e.g. 10000 steps)';

const CreateGoal = Type.Object({
  title: Title,
  goal_type: Type.Optional(StringEnum(GOAL_TYPES, { default: 'scale' })),
  target_value: Type.Number(),
  current_value: Type.Optional(Type.Number({ description: 'default 0' })),
  min_value: Type.Optional(Type.Number({ description: 'default 0' })),
  max_value: Type.Optional(Type.Number({ description: 'default 10 (1 for boolean goals)' })),
  unit: Type.Optional(Unit),
}, { title: 'CreateGoal', description: 'a new goal' });

const PATCH_FIELDS = ['title', 'target_value', 'current_value', 'min_value', 'max_value', 'unit'] as const;
const UpdateGoal = Type.Object({
  title: Type.Optional(Title),
  target_value: Type.Optional(Type.Number()),
  current_value: Type.Optional(Type.Number()),
  min_value: Type.Optional(Type.Number()),
  max_value: Type.Optional(Type.Number()),
  unit: Type.Optional(Unit),
}, { title: 'UpdateGoal', description: 'the fields to change; at least one' });

const ListQuery = Type.Object({
  limit: Type.Integer({ minimum: 1, default: DEFAULT_GOALS_PAGE, description: `active goals to list; any positive number, at most ${MAX_GOALS_PAGE} served; ignored with include_inactive` }),
  include_inactive: Type.Boolean({ default: false, description: 'true: every goal, newest first, limit ignored' }),
});
const ProgressQuery = Type.Object({ current_value: Type.Number() });
const HistoryQuery = Type.Object({ days: Type.Integer({ minimum: 1, maximum: MAX_HISTORY_DAYS, default: DEFAULT_HISTORY_DAYS }) });

export function view(g: GoalRecord): Record<string, unknown> {
  return {
    id: g.id,
    title: g.title,
    goal_type: g.goalType,
    target_value: g.targetValue,
    current_value: g.currentValue,
    min_value: g.minValue,
    max_value: g.maxValue,
    unit: g.unit,
    is_active: g.isActive,
    created_at: g.createdAt,
    updated_at: g.updatedAt,
  };
}

type Values = Pick<NewGoal, 'goalType' | 'targetValue' | 'currentValue' | 'minValue' | 'maxValue'>;

/** Checks the value rules (VALUE_RULES) on a goal's values; `where` names the location of current_value in the request. */
function checkValues(v: Values, where: (string | number)[] = ['body', 'current_value']): void {
  for (const [name, n] of [['target_value', v.targetValue], ['min_value', v.minValue], ['max_value', v.maxValue]] as const) {
    if (!Number.isFinite(n)) throw valueError(['body', name], 'must be a finite number');
  }
  if (!Number.isFinite(v.currentValue)) throw valueError(where, 'must be a finite number');
  if (v.minValue > v.maxValue) throw valueError(['body', 'max_value'], 'max_value must be greater than or equal to min_value');
  if (v.goalType === 'boolean') {
    if (v.minValue !== 0 || v.maxValue !== 1) throw valueError(['body', 'max_value'], 'boolean goals range from 0 to 1');
    if (v.targetValue !== 0 && v.targetValue !== 1) throw valueError(['body', 'target_value'], 'a boolean goal takes 0 or 1');
    if (v.currentValue !== 0 && v.currentValue !== 1) throw valueError(where, 'a boolean goal takes 0 or 1');
  } else if (v.goalType === 'scale') {
    if (v.targetValue < v.minValue || v.targetValue > v.maxValue) throw valueError(['body', 'target_value'], 'target_value must lie between min_value and max_value');
    if (v.currentValue < v.minValue || v.currentValue > v.maxValue) throw valueError(where, 'current_value must lie between min_value and max_value');
  }
}

export function goalRoutes(s: Services): AppRoute[] {
  const goals = s.goals;
  const tags = ['Goals'];
  const notFoundDoc = { 404: { description: 'no such goal of yours' } };
  return [
    {
      method: 'get',
      path: '/v1/dev/user/goals',
      operationId: 'listGoals',
      summary: `List goals (scope goals:read): active ones oldest first (limit ${DEFAULT_GOALS_PAGE} by default); with include_inactive every goal, newest first`,
      tags,
      auth: { kind: 'api_key', scope: 'goals:read' },
      cacheable: true,
      query: ListQuery,
      responses: { 200: { description: 'the goals', schema: Type.Array(GoalSchema, { title: 'GoalList', description: 'goals' }) } },
      async handler({ auth, query }) {
        if (query.include_inactive) return { body: (await goals.listAll(auth.uid)).map(view), headers: { 'x-has-more': 'false' } };
        const limit = Math.min(query.limit as number, MAX_GOALS_PAGE);
        const page = splitPage(await goals.listActive(auth.uid, limit + 1), limit);
        // Active goals have no offset: the header says whether the limit cut the list short.
        return { body: page.items.map(view), headers: { 'x-has-more': String(page.more) } };
      },
    },
    {
      method: 'get',
      path: '/v1/dev/user/goals/{goal_id}',
      operationId: 'getGoal',
      summary: 'Get one goal (scope goals:read)',
      tags,
      auth: { kind: 'api_key', scope: 'goals:read' },
      cacheable: true,
      responses: { 200: { description: 'the goal', schema: GoalSchema }, ...notFoundDoc },
      async handler({ auth, params }) {
        const g = await goals.get(auth.uid, params.goal_id!);
        if (!g) throw notFound('Goal');
        return { body: view(g) };
      },
    },
    {
      method: 'post',
      path: '/v1/dev/user/goals',
      operationId: 'createGoal',
      summary: `Create a goal (scope goals:write); goal_type defaults to scale; at most ${MAX_ACTIVE_GOALS} active: a new one deactivates the oldest active goal`,
      description: `Value rules: ${VALUE_RULES}.`,
      tags,
      auth: { kind: 'api_key', scope: 'goals:write' },
      body: CreateGoal,
      responses: { 200: { description: 'the new goal', schema: GoalSchema } },
      async handler({ auth, body }) {
        const goalType = (body.goal_type ?? 'scale') as GoalType;
        const goal: NewGoal = {
          title: body.title as string,
          goalType,
          targetValue: body.target_value as number,
          currentValue: (body.current_value as number | undefined) ?? 0,
          minValue: (body.min_value as number | undefined) ?? 0,
          maxValue: (body.max_value as number | undefined) ?? (goalType === 'boolean' ? 1 : 10),
          unit: (body.unit as string | null | undefined) ?? null,
        };
        checkValues(goal);
        const g = await goals.create(auth.uid, goal, s.clock.now());
        s.logger.info({ goalId: g.id }, 'goal created');
        return { body: view(g) };
      },
    },
    {
      method: 'patch',
      path: '/v1/dev/user/goals/{goal_id}',
      operationId: 'updateGoal',
      summary: 'Update a goal’s title, values or unit (scope goals:write); at least one field; writes no progress history',
      description: `The values after the update must follow the value rules: ${VALUE_RULES}.`,
      tags,
      auth: { kind: 'api_key', scope: 'goals:write' },
      body: UpdateGoal,
      responses: { 200: { description: 'the updated goal', schema: GoalSchema }, ...notFoundDoc },
      async handler({ auth, params, body }) {
        requireSomeField(body, PATCH_FIELDS);
        const current = await goals.get(auth.uid, params.goal_id!);
        if (!current) throw notFound('Goal');
        const patch: GoalPatch = {};
        if (body.title !== undefined) patch.title = body.title as string;
        if (body.target_value !== undefined) patch.targetValue = body.target_value as number;
        if (body.current_value !== undefined) patch.currentValue = body.current_value as number;
        if (body.min_value !== undefined) patch.minValue = body.min_value as number;
        if (body.max_value !== undefined) patch.maxValue = body.max_value as number;
        if (body.unit !== undefined) patch.unit = body.unit as string | null;
        checkValues({ ...current, ...patch });
        const g = await goals.update(auth.uid, current.id, patch, s.clock.now());
        if (!g) throw notFound('Goal');
        return { body: view(g) };
      },
    },
    {
      method: 'patch',
      path: '/v1/dev/user/goals/{goal_id}/progress',
      operationId: 'updateGoalProgress',
      summary: 'Set a goal’s progress from the query parameter current_value (scope goals:write); records it as the value of the current UTC day',
      description: `One history entry per goal and UTC day: a later value the same day replaces the earlier one. Value rules: ${VALUE_RULES}.`,
      tags,
      auth: { kind: 'api_key', scope: 'goals:write' },
      query: ProgressQuery,
      responses: { 200: { description: 'the updated goal', schema: GoalSchema }, ...notFoundDoc },
      async handler({ auth, params, query }) {
        const current = await goals.get(auth.uid, params.goal_id!);
        if (!current) throw notFound('Goal');
        const value = query.current_value as number;
        checkValues({ ...current, currentValue: value }, ['query', 'current_value']);
        const g = await goals.setProgress(auth.uid, current.id, value, s.clock.now());
        if (!g) throw notFound('Goal');
        return { body: view(g) };
      },
    },
    {
      method: 'get',
      path: '/v1/dev/user/goals/{goal_id}/history',
      operationId: 'getGoalHistory',
      summary: `Progress history of a goal (scope goals:read): one entry per UTC day over the last \`days\` days (today included; default ${DEFAULT_HISTORY_DAYS}, 1 to ${MAX_HISTORY_DAYS}), newest first`,
      tags,
      auth: { kind: 'api_key', scope: 'goals:read' },
      query: HistoryQuery,
      responses: { 200: { description: 'the history', schema: Type.Array(HistoryEntry, { title: 'GoalHistory', description: 'one entry per UTC day with progress, newest first' }) }, ...notFoundDoc },
      async handler({ auth, params, query }) {
        const entries = await goals.history(auth.uid, params.goal_id!, query.days as number, s.clock.now());
        if (!entries) throw notFound('Goal');
        return { body: entries.map((e) => ({ date: e.date, value: e.value, recorded_at: e.recordedAt })) };
      },
    },
    {
      method: 'delete',
      path: '/v1/dev/user/goals/{goal_id}',
      operationId: 'deleteGoal',
      summary: 'Delete a goal and its history (scope goals:write)',
      tags,
      auth: { kind: 'api_key', scope: 'goals:write' },
      responses: { 200: { description: 'deleted', schema: SuccessSchema }, ...notFoundDoc },
      async handler({ auth, params }) {
        if (!(await goals.delete(auth.uid, params.goal_id!))) throw notFound('Goal');
        return { body: SUCCESS };
      },
    },
  ];
}
