// Developer conversations: read, list, create from text or segments (processed synchronously), update, delete.
// One file because the conversation routes share their schemas with the OpenAPI document and the MCP tools.
import { Type, type TSchema } from '@sinclair/typebox';
import { EngineError, validationError, valueError } from '../../engine/errors.js';
import { ConversationStatus } from '../../engine/protocol.js';
import { CONVERSATION_CATEGORIES, type ProcessResult, type TextSource } from '../../engine/processing/types.js';
import type { Geolocation, SegmentInput } from '../../engine/db/conversations.js';
import { DateBound, Limit, Offset, boundToUtcIso, notFound, pagingHeaders, splitPage, StringEnum, SuccessSchema, SUCCESS, toUtcIso } from './common.js';
import type { AppRoute, Services } from './types.js';
import { conversationView } from '../../engine/conversations/view.js';
import { afterProcessed } from '../../engine/conversations/derived.js';

/** Most conversations one page holds; a larger `limit` is served in pages of this size (the compatible system sets no bound). */
export const MAX_CONVERSATIONS_PAGE = 100;
/** Default `limit` of the conversation list, as in the compatible system. */
export const DEFAULT_CONVERSATIONS_PAGE = 25;
export const MAX_TEXT_CHARS = 100_000;
export const MAX_SEGMENTS = 500;
export const MAX_TITLE_CHARS = 500;
/** Length of a text upload when finished_at is not given, in seconds, as in the compatible system. */
export const DEFAULT_TEXT_DURATION_S = 300;

const nullable = <T extends TSchema>(s: T) => Type.Union([s, Type.Null()]);
const DateTime = Type.String({ format: 'date-time' });

export const GeolocationSchema = Type.Object({
  latitude: Type.Number({ minimum: -90, maximum: 90 }),
  longitude: Type.Number({ minimum: -180, maximum: 180 }),
  address: Type.Optional(nullable(Type.String({ maxLength: 1000 }))),
  external_place_id: Type.Optional(nullable(Type.String({ maxLength: 500, description: 'identifier of a place in an external map service' }))),
  location_type: Type.Optional(nullable(Type.String({ maxLength: 100 }))),
}, { title: 'Geolocation', description: 'where a conversation took place' });

export const ConversationActionItemSchema = Type.Object({
  description: Type.String(),
  completed: Type.Boolean({ default: false }),
  completed_at: nullable(DateTime),
  conversation_id: nullable(Type.String()),
  created_at: nullable(DateTime),
  due_at: nullable(DateTime),
  updated_at: nullable(DateTime),
}, { title: 'ConversationActionItem', description: 'an action item found in a conversation' });

export const ConversationEventSchema = Type.Object({
  title: Type.String(),
  start: DateTime,
  description: Type.String({ default: '' }),
  duration: Type.Integer({ default: 30, description: 'minutes' }),
  created: Type.Boolean({ default: false }),
}, { title: 'ConversationEvent', description: 'a calendar event found in a conversation' });

export const StructuredSchema = Type.Object({
  title: Type.String(),
  overview: Type.String(),
  category: StringEnum(CONVERSATION_CATEGORIES, { title: 'ConversationCategory' }),
  emoji: Type.String({ default: '🧠' }),
  action_items: Type.Array(ConversationActionItemSchema),
  events: Type.Array(ConversationEventSchema),
}, { title: 'Structured', description: 'the summary of a conversation' });

export const DevTranscriptSegmentSchema = Type.Object({
  text: Type.String(),
  start: Type.Number({ description: 'seconds from the conversation start' }),
  end: Type.Number({ description: 'seconds from the conversation start' }),
  id: nullable(Type.String()),
  speaker_id: nullable(Type.Integer()),
  speaker_name: nullable(Type.String({ description: '"User" for the device owner, else "Speaker N"' })),
}, { title: 'TranscriptSegment', description: 'one stretch of speech of a conversation' });

export const ConversationSchema = Type.Object({
  id: Type.String(),
  created_at: DateTime,
  started_at: nullable(DateTime),
  finished_at: nullable(DateTime),
  structured: StructuredSchema,
  folder_id: nullable(Type.String()),
  folder_name: nullable(Type.String()),
  geolocation: nullable(GeolocationSchema),
  language: nullable(Type.String()),
  source: nullable(Type.String()),
  transcript_segments: nullable(Type.Array(DevTranscriptSegmentSchema, { description: 'null unless include_transcript=true' })),
}, { title: 'Conversation', description: 'a conversation with its summary, and its transcript on request' });

export const CreatedConversationSchema = Type.Object({
  id: Type.String(),
  status: StringEnum(Object.values(ConversationStatus), { title: 'ConversationStatus' }),
  discarded: Type.Boolean(),
}, { title: 'CreatedConversation', description: 'a conversation just created and processed' });

/** The owner's view of a conversation: the developer view plus its status and discarded flag, as in memory_created. */
const ReprocessedSchema = Type.Composite([
  ConversationSchema,
  Type.Object({ status: Type.Union(Object.values(ConversationStatus).map((st) => Type.Literal(st))), discarded: Type.Boolean() }),
], { title: 'OwnConversation', description: 'a conversation as its owner sees it: the developer view plus its processing status' });

const IncludeTranscript = Type.Boolean({ default: false, description: 'fill transcript_segments' });

const GetQuery = Type.Object({ include_transcript: Type.Optional(IncludeTranscript) });

const ListQuery = Type.Object({
  start_date: Type.Optional(DateBound('YYYY-MM-DD or an ISO 8601 date-time (UTC without an offset); conversations started at or after it')),
  end_date: Type.Optional(DateBound('YYYY-MM-DD or an ISO 8601 date-time (UTC without an offset); conversations started at or before it (a bare date includes the whole day)')),
  categories: Type.Optional(Type.String({ description: 'comma-separated categories; an unknown one answers 400' })),
  limit: Limit(DEFAULT_CONVERSATIONS_PAGE, MAX_CONVERSATIONS_PAGE),
  offset: Offset(),
  include_transcript: Type.Optional(IncludeTranscript),
});

const CreateFromTextBody = Type.Object({
  text: Type.String({ minLength: 1, maxLength: MAX_TEXT_CHARS }),
  text_source: Type.Optional(StringEnum(['audio_transcript', 'message', 'other_text'], { default: 'other_text' })),
  text_source_spec: Type.Optional(nullable(Type.String({ maxLength: 200, description: 'free-form detail of the source, such as an app name' }))),
  started_at: Type.Optional(nullable(DateTime)),
  finished_at: Type.Optional(nullable(DateTime)),
  language: Type.Optional(Type.String({ minLength: 1, maxLength: 16, default: 'en' })),
  geolocation: Type.Optional(nullable(GeolocationSchema)),
}, { title: 'CreateConversationFromText', description: 'a text to store and process as a conversation' });

const SegmentBody = Type.Object({
  text: Type.String({ maxLength: MAX_TEXT_CHARS }),
  speaker: Type.Optional(Type.String({ maxLength: 32, default: 'SPEAKER_00' })),
  speaker_id: Type.Optional(nullable(Type.Integer({ minimum: 0 }))),
  is_user: Type.Optional(Type.Boolean({ default: false })),
  person_id: Type.Optional(nullable(Type.String({ maxLength: 64 }))),
  start: Type.Number(),
  end: Type.Number(),
}, { title: 'TranscriptSegmentInput', description: 'one segment of an uploaded transcript; times in seconds from the start' });

const FromSegmentsBody = Type.Object({
  transcript_segments: Type.Array(SegmentBody, { minItems: 1, maxItems: MAX_SEGMENTS }),
  source: Type.Optional(Type.String({ minLength: 1, maxLength: 64, default: 'external_integration' })),
  started_at: Type.Optional(nullable(DateTime)),
  finished_at: Type.Optional(nullable(DateTime)),
  language: Type.Optional(Type.String({ minLength: 1, maxLength: 16, default: 'en' })),
  geolocation: Type.Optional(nullable(GeolocationSchema)),
}, { title: 'CreateConversationFromSegments', description: 'transcript segments to store and process as a conversation' });

const PatchBody = Type.Object({
  title: Type.Optional(Type.String({ minLength: 1, maxLength: MAX_TITLE_CHARS })),
  discarded: Type.Optional(Type.Boolean()),
}, { title: 'UpdateConversation', description: 'the fields to change; at least one' });

/** The view of a conversation just changed by the caller (so known to exist), read back from the store. */
export async function storedConversationView(s: Services, uid: string, id: string): Promise<Record<string, unknown>> {
  return conversationView((await s.conversations.get(uid, id))!);
}

function parseCategories(raw: string | undefined): string[] | undefined {
  if (raw === undefined) return undefined;
  const list = raw.split(',').map((x) => x.trim()).filter(Boolean);
  for (const c of list) {
    if (!(CONVERSATION_CATEGORIES as readonly string[]).includes(c)) {
      throw new EngineError('ENG_ERR_CATEGORY_INVALID', { category: c, valid: CONVERSATION_CATEGORIES.join(', ') });
    }
  }
  return list.length > 0 ? list : undefined;
}

/** The fields the text and the segments uploads share (validated by their body schemas). */
interface UploadBody {
  started_at?: string | null;
  finished_at?: string | null;
  language?: string;
  geolocation?: Geolocation | null;
}

/** What differs between the text and the segments uploads. */
interface UploadKind {
  /** Length of the conversation when finished_at is not given, in seconds. */
  defaultDurationS: number;
  /** Whether finished_at may equal started_at (a text has no length of its own; segments span time). */
  allowZeroLength: boolean;
  /** The transcript, given the conversation's length in seconds. */
  segments: (durationS: number) => SegmentInput[];
  textSource: TextSource;
  textSourceSpec: string | null;
  source: string;
  allowDiscard: boolean;
}

/**
 * Settles the times (started_at defaults to now, finished_at to started_at + `defaultDurationS`; 422 when finished_at
 * comes first), stores the upload as `processing`, runs the processor in the request, and stores the result as
 * `completed` (or `failed`).
 */
async function createAndProcess(s: Services, uid: string, body: UploadBody, kind: UploadKind): Promise<{ id: string; status: string; discarded: boolean }> {
  const startedAt = body.started_at ? toUtcIso(body.started_at) : new Date(s.clock.now()).toISOString();
  const finishedAt = body.finished_at ? toUtcIso(body.finished_at) : new Date(Date.parse(startedAt) + kind.defaultDurationS * 1000).toISOString();
  if (finishedAt < startedAt || (finishedAt === startedAt && !kind.allowZeroLength)) throw valueError(['body', 'finished_at'], 'finished_at must be after started_at');
  const segments = kind.segments((Date.parse(finishedAt) - Date.parse(startedAt)) / 1000);
  const language = body.language ?? 'en';
  const now = s.clock.now();
  await s.users.ensure(uid, now, s.config.memoryAccessDefault === 'enabled');
  const record = await s.conversations.create({
    userId: uid,
    status: ConversationStatus.PROCESSING,
    startedAt,
    finishedAt,
    source: kind.source,
    language,
    textSource: kind.textSource,
    textSourceSpec: kind.textSourceSpec,
    geolocation: body.geolocation ?? null,
    segments,
    now,
  });
  let result: ProcessResult;
  try {
    result = await s.processor.process({
      segments: segments.map((x) => ({ text: x.text, start: x.start, end: x.end, ...(x.speaker ? { speaker: x.speaker } : {}), speakerId: x.speakerId ?? null, isUser: x.isUser ?? false })),
      textSource: kind.textSource,
      language,
      startedAt,
      finishedAt,
      allowDiscard: kind.allowDiscard,
    });
  } catch (err) {
    await s.conversations.setStatus(record.id, ConversationStatus.FAILED, s.clock.now());
    s.logger.error({ conversationId: record.id, err: { name: (err as Error)?.name } }, 'conversation processing failed');
    throw err;
  }
  // An upload completes in the request and announces nothing: recorded first, so no start-up scan announces it either.
  await s.conversations.markFirstProcessed(record.id, s.clock.now());
  await s.conversations.saveResult(record.id, result, s.clock.now());
  await afterProcessed(s, uid, record.id, result);
  return { id: record.id, status: ConversationStatus.COMPLETED, discarded: result.discarded };
}

const TAGS = ['Conversations'];
const NOT_FOUND_DOC = { description: 'no such conversation of yours (also for another user\'s id)' };

export function conversationRoutes(s: Services): AppRoute[] {
  return [
    {
      method: 'get',
      path: '/v1/dev/user/conversations/{conversation_id}',
      operationId: 'getConversation',
      summary: 'Get one conversation',
      description: 'Returns discarded conversations too; deleted or other users\' conversations answer 404. Also accepts the signed-in ID token.',
      tags: TAGS,
      auth: { kind: 'api_key', scope: 'conversations:read', alsoIdToken: true },
      query: GetQuery,
      responses: { 200: { description: 'the conversation', schema: ConversationSchema }, 404: NOT_FOUND_DOC },
      async handler({ auth, params, query }) {
        const c = await s.conversations.get(auth.uid, params.conversation_id!, { includeSegments: query.include_transcript === true });
        if (!c) throw notFound('Conversation');
        return { body: conversationView(c) };
      },
    },
    {
      method: 'get',
      path: '/v1/dev/user/conversations',
      operationId: 'listConversations',
      summary: 'List conversations, newest first',
      description:
        `Completed, kept (not discarded) conversations, ordered by started_at descending then id. Date filters apply to started_at. ` +
        `limit defaults to ${DEFAULT_CONVERSATIONS_PAGE}; a page holds at most ${MAX_CONVERSATIONS_PAGE} (X-Has-More and Link tell whether more follow). A bare JSON array.`,
      tags: TAGS,
      auth: { kind: 'api_key', scope: 'conversations:read' },
      query: ListQuery,
      responses: { 200: { description: 'a page of conversations', schema: Type.Array(ConversationSchema, { title: 'ConversationList', description: 'a page of conversations, newest first' }) }, 400: { description: 'unknown category' } },
      async handler({ auth, query }) {
        const startDate = query.start_date === undefined ? undefined : boundToUtcIso(query.start_date, false);
        const endDate = query.end_date === undefined ? undefined : boundToUtcIso(query.end_date, true);
        const categories = parseCategories(query.categories);
        const limit = Math.min(query.limit as number, MAX_CONVERSATIONS_PAGE);
        const rows = await s.conversations.list(auth.uid, {
          ...(startDate ? { startDate } : {}),
          ...(endDate ? { endDate } : {}),
          ...(categories ? { categories } : {}),
          limit: limit + 1,
          offset: query.offset as number,
          includeSegments: query.include_transcript === true,
        });
        const page = splitPage(rows, limit);
        return { body: page.items.map(conversationView), headers: pagingHeaders('/v1/dev/user/conversations', query, limit, page.more) };
      },
    },
    {
      method: 'post',
      path: '/v1/dev/user/conversations',
      operationId: 'createConversationFromText',
      summary: 'Create a conversation from a text; it is processed before the answer',
      description: `started_at defaults to now, finished_at to started_at + ${DEFAULT_TEXT_DURATION_S} s. External texts are never discarded.`,
      tags: TAGS,
      auth: { kind: 'api_key', scope: 'conversations:write' },
      body: CreateFromTextBody,
      responses: { 200: { description: 'the stored conversation', schema: CreatedConversationSchema } },
      async handler({ auth, body }) {
        const text = body.text as string;
        return {
          body: await createAndProcess(s, auth.uid, body, {
            defaultDurationS: DEFAULT_TEXT_DURATION_S,
            allowZeroLength: true,
            segments: (durationS) => [{ text, start: 0, end: Math.max(durationS, 0.001), speaker: 'SPEAKER_00', isUser: false }],
            textSource: (body.text_source ?? 'other_text') as TextSource,
            textSourceSpec: body.text_source_spec ?? null,
            source: 'external_integration',
            allowDiscard: false,
          }),
        };
      },
    },
    {
      method: 'post',
      path: '/v1/dev/user/conversations/from-segments',
      operationId: 'createConversationFromSegments',
      summary: 'Create a conversation from transcript segments; it is processed before the answer',
      description: 'started_at defaults to now, finished_at to started_at + the last segment\'s end. May be discarded when nothing worth keeping was said.',
      tags: TAGS,
      auth: { kind: 'api_key', scope: 'conversations:write' },
      body: FromSegmentsBody,
      responses: { 200: { description: 'the stored conversation', schema: CreatedConversationSchema } },
      async handler({ auth, body }) {
        const segs = body.transcript_segments as Array<{ text: string; speaker?: string; speaker_id?: number | null; is_user?: boolean; person_id?: string | null; start: number; end: number }>;
        const issues = [];
        for (const [i, seg] of segs.entries()) {
          const loc = ['body', 'transcript_segments', i];
          if (seg.start < 0) issues.push({ loc, msg: `Value error, Segment ${i}: start time cannot be negative`, type: 'value_error' });
          else if (seg.end <= seg.start) issues.push({ loc, msg: `Value error, Segment ${i}: end time must be after start time`, type: 'value_error' });
          if (seg.text.trim() === '') issues.push({ loc, msg: `Value error, Segment ${i}: text cannot be empty`, type: 'value_error' });
        }
        if (issues.length > 0) throw validationError(issues);
        return {
          body: await createAndProcess(s, auth.uid, body, {
            defaultDurationS: segs[segs.length - 1]!.end,
            allowZeroLength: false,
            segments: () => segs.map((x) => ({
              text: x.text,
              start: x.start,
              end: x.end,
              speaker: x.speaker ?? 'SPEAKER_00',
              ...(x.speaker_id !== undefined && x.speaker_id !== null ? { speakerId: x.speaker_id } : {}),
              isUser: x.is_user ?? false,
              personId: x.person_id ?? null,
            })),
            textSource: 'audio_transcript',
            textSourceSpec: null,
            source: body.source ?? 'external_integration',
            allowDiscard: true,
          }),
        };
      },
    },
    {
      method: 'patch',
      path: '/v1/dev/user/conversations/{conversation_id}',
      operationId: 'updateConversation',
      summary: 'Update the title and/or the discarded flag',
      description: 'At least one of title and discarded is required (422 otherwise).',
      tags: TAGS,
      auth: { kind: 'api_key', scope: 'conversations:write' },
      body: PatchBody,
      responses: { 200: { description: 'the updated conversation', schema: ConversationSchema }, 404: NOT_FOUND_DOC },
      async handler({ auth, params, body }) {
        if (body.title === undefined && body.discarded === undefined) throw valueError(['body'], 'At least one field (title or discarded) must be provided');
        const id = params.conversation_id!;
        const ok = await s.conversations.update(auth.uid, id, { ...(body.title !== undefined ? { title: body.title } : {}), ...(body.discarded !== undefined ? { discarded: body.discarded } : {}) }, s.clock.now());
        if (!ok) throw notFound('Conversation');
        return { body: await storedConversationView(s, auth.uid, id) };
      },
    },
    {
      method: 'get',
      path: '/v1/conversations/{conversation_id}',
      operationId: 'getOwnConversation',
      summary: 'Get one of your conversations with its processing status',
      description:
        'For the signed-in owner: the developer view plus `status` (`in_progress`, `processing`, `completed`, `failed`) and `discarded`, ' +
        'so a failed conversation can be found and reprocessed.',
      tags: TAGS,
      auth: { kind: 'id_token' },
      query: GetQuery,
      responses: { 200: { description: 'the conversation', schema: ReprocessedSchema }, 404: NOT_FOUND_DOC },
      async handler({ auth, params, query }) {
        const c = await s.conversations.get(auth.uid, params.conversation_id!, { includeSegments: query.include_transcript === true });
        if (!c) throw notFound('Conversation');
        return { body: { ...conversationView(c), status: c.status, discarded: c.discarded } };
      },
    },
    {
      method: 'post',
      path: '/v1/conversations/{conversation_id}/reprocess',
      operationId: 'reprocessConversation',
      summary: 'Process a completed or failed conversation again',
      description:
        'The signed-in owner\'s retry: the conversation moves to `processing` and a process-conversation job is queued (a failed one\'s ' +
        'automatic retry waiting for its backoff runs now). Its stored structure stays until the new result replaces it; live sessions hear ' +
        '`memory_processing_started`, then `memory_created`. A reprocess does not fire conversation-created app webhooks again. ' +
        'Answers the conversation, now `processing`; 409 while it is still recording or processing.',
      tags: TAGS,
      auth: { kind: 'id_token' },
      responses: {
        200: { description: 'the conversation, now processing', schema: ReprocessedSchema },
        404: NOT_FOUND_DOC,
        409: { description: 'the conversation is `in_progress` or `processing`' },
      },
      async handler({ auth, params }) {
        const r = await s.lifecycle.reprocess(auth.uid, params.conversation_id!);
        if (!r) throw notFound('Conversation');
        if ('busy' in r) throw new EngineError('ENG_ERR_CONVERSATION_BUSY', { status: r.busy });
        return { body: { ...conversationView(r.conversation), status: r.conversation.status, discarded: r.conversation.discarded } };
      },
    },
    {
      method: 'delete',
      path: '/v1/dev/user/conversations/{conversation_id}',
      operationId: 'deleteConversation',
      summary: 'Delete a conversation and its transcript for good',
      tags: TAGS,
      auth: { kind: 'api_key', scope: 'conversations:write' },
      responses: { 200: { description: 'deleted', schema: SuccessSchema }, 404: NOT_FOUND_DOC },
      async handler({ auth, params }) {
        if (!(await s.conversations.delete(auth.uid, params.conversation_id!))) throw notFound('Conversation');
        s.logger.info({ conversationId: params.conversation_id }, 'conversation deleted');
        return { body: SUCCESS };
      },
    },
  ];
}
