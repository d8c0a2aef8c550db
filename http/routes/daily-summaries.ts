// A signed-in user's day summaries: the list, one by id, and one made on request (pushed, never sent to the webhook).
import { Type } from '@sinclair/typebox';
import { EngineError } from '../../engine/errors.js';
import { daySummaries } from '../../engine/summaries/day-summary.js';
import { DaySummaryFailedError } from '../../engine/summaries/generate.js';
import { Limit, notFound, Offset, pagingHeaders, splitPage } from './common.js';
import type { AppRoute, Services } from './types.js';

export const DEFAULT_SUMMARIES_PAGE = 20;
export const MAX_SUMMARIES_PAGE = 100;

const Item = (props: Record<string, ReturnType<typeof Type.String>>) => Type.Array(Type.Object(props));
const S = Type.String();

export const DaySummarySchema = Type.Object({
  id: S,
  date: Type.String({ description: 'the local calendar day covered, YYYY-MM-DD' }),
  created_at: Type.String({ description: 'naive ISO 8601 in UTC, without offset' }),
  headline: S,
  overview: S,
  day_emoji: S,
  stats: Type.Object({ total_conversations: Type.Integer(), total_duration_minutes: Type.Integer(), action_items_count: Type.Integer() }),
  highlights: Type.Array(Type.Object({ topic: S, emoji: S, summary: S, conversation_ids: Type.Array(S) })),
  action_items: Type.Array(Type.Object({ description: S, priority: Type.String({ description: 'high (it has a due date) or medium' }), completed: Type.Boolean(), source_conversation_id: S })),
  unresolved_questions: Item({ question: S, conversation_id: S }),
  decisions_made: Item({ decision: S, conversation_id: S }),
  knowledge_nuggets: Item({ insight: S, conversation_id: S }),
  locations: Type.Array(Type.Object({ name: S, latitude: Type.Number(), longitude: Type.Number(), time: Type.String({ description: 'local HH:MM' }) })),
}, { title: 'DaySummary', description: 'a summary of one day' });

const ListQuery = Type.Object({ limit: Limit(DEFAULT_SUMMARIES_PAGE, MAX_SUMMARIES_PAGE), offset: Offset() });

export function dailySummaryRoutes(s: Services): AppRoute[] {
  const tags = ['Notifications'];
  const summaries = daySummaries(s);
  return [
    {
      method: 'get',
      path: '/v1/users/daily-summaries',
      operationId: 'listDailySummaries',
      summary: 'Your day summaries, newest first',
      tags,
      auth: { kind: 'id_token' },
      query: ListQuery,
      responses: { 200: { description: 'a page of summaries', schema: Type.Array(DaySummarySchema, { title: 'DaySummaryList', description: 'a page of your day summaries, newest first' }) } },
      async handler({ auth, query }) {
        const page = Math.min(query.limit as number, MAX_SUMMARIES_PAGE);
        const { items, more } = splitPage(await summaries.repo.list(auth.uid, page + 1, query.offset as number), page);
        return { body: items, headers: pagingHeaders('/v1/users/daily-summaries', query, page, more) };
      },
    },
    {
      method: 'get',
      path: '/v1/users/daily-summaries/{id}',
      operationId: 'getDailySummary',
      summary: 'One of your day summaries',
      tags,
      auth: { kind: 'id_token' },
      responses: { 200: { description: 'the summary', schema: DaySummarySchema } },
      async handler({ auth, params }) {
        const found = await summaries.repo.get(auth.uid, params.id!);
        if (!found) throw notFound('Daily summary');
        return { body: found };
      },
    },
    {
      method: 'post',
      path: '/v1/users/daily-summaries',
      operationId: 'createDailySummary',
      summary: 'Summarise your day now (the previous day before local noon): stored and pushed to your devices, never sent to your day_summary webhook',
      tags,
      auth: { kind: 'id_token' },
      responses: { 200: { description: 'the new summary', schema: DaySummarySchema } },
      async handler({ auth }) {
        let r: Awaited<ReturnType<typeof summaries.onDemand>>;
        try {
          r = await summaries.onDemand(auth.uid);
        } catch (err) {
          if (err instanceof DaySummaryFailedError) throw new EngineError('ENG_ERR_DEPENDENCY_UNAVAILABLE', { dependency: 'the language model' });
          throw err;
        }
        if (r === 'no_push_token') throw new EngineError('ENG_ERR_HTTP_BAD_REQUEST', { reason: 'No push token registered: register a device with POST /v1/users/fcm-token first' });
        if (r === 'no_conversations' || r === 'nothing_transcribed') throw notFound('Conversations with transcribed speech on that day');
        return { body: r };
      },
    },
  ];
}
