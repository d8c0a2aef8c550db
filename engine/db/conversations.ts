// Conversations and their transcript segments: stubs for live sessions, segment appends, status changes, processor results, developer reads.
// One file because the live path's group-committed writes and the developer reads share one table layout.
import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import { ConversationStatus } from '../protocol.js';
import type { ConversationCategory, ProcessResult, TextSource } from '../processing/types.js';
import { GroupCommit } from './group-commit.js';
import { execute, inJsonList, insertRowsSql, keepsStatements, repeat, runInserts, select, type RowValue, type TransactionRun } from './prepared.js';
import { bool, isoNow } from './store.js';

export interface Geolocation {
  latitude: number;
  longitude: number;
  address?: string | null;
  external_place_id?: string | null;
  location_type?: string | null;
}

/** A stored transcript segment, with the fields of the real-time segment the listen socket sends. */
export interface SegmentRecord {
  id: string;
  text: string;
  speaker: string;
  speakerId: number | null;
  isUser: boolean;
  personId: string | null;
  /** Seconds from the conversation start. */
  start: number;
  end: number;
  sttProvider: string | null;
  speechProfileProcessed: boolean;
  /** Translations of `text` (live sessions with `language=multi`); absent when it has none. */
  translations?: SegmentTranslation[];
}

/** One translation of a segment's text. */
export interface SegmentTranslation {
  /** BCP 47 tag of the language translated into. */
  lang: string;
  text: string;
}

/** A photo attached to a conversation (assembled from a live session's image_chunk messages). */
export interface PhotoRecord {
  id: string;
  conversationId: string;
  createdAt: string;
  bytes: Buffer;
  /** Sniffed from the magic bytes: image/jpeg, image/png, image/webp, else application/octet-stream. */
  contentType: string;
  size: number;
}

/** The image type from its first bytes; the client's word is never taken for it. */
export function sniffImageType(b: Uint8Array): string {
  if (b.length >= 3 && b[0] === 0xff && b[1] === 0xd8 && b[2] === 0xff) return 'image/jpeg';
  if (b.length >= 8 && [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a].every((x, i) => b[i] === x)) return 'image/png';
  if (b.length >= 12 && ascii(b, 0, 4) === 'RIFF' && ascii(b, 8, 12) === 'WEBP') return 'image/webp';
  return 'application/octet-stream';
}

const ascii = (b: Uint8Array, from: number, to: number): string => String.fromCharCode(...b.subarray(from, to));

export type SegmentInput = Pick<SegmentRecord, 'text' | 'start' | 'end'> & Partial<Omit<SegmentRecord, 'text' | 'start' | 'end'>>;

export interface ActionItemView {
  description: string;
  completed: boolean;
  completed_at: string | null;
  conversation_id: string | null;
  created_at: string | null;
  due_at: string | null;
  updated_at: string | null;
}

export interface EventView {
  title: string;
  start: string;
  description: string;
  duration: number;
  created: boolean;
}

export interface ConversationRecord {
  id: string;
  userId: string;
  status: ConversationStatus;
  createdAt: string;
  updatedAt: string;
  startedAt: string;
  finishedAt: string | null;
  source: string | null;
  language: string | null;
  textSource: TextSource | null;
  textSourceSpec: string | null;
  title: string;
  overview: string;
  emoji: string;
  category: ConversationCategory;
  actionItems: ActionItemView[];
  events: EventView[];
  producedBy: string | null;
  discarded: boolean;
  deleted: boolean;
  visibility: string;
  folderId: string | null;
  folderName: string | null;
  geolocation: Geolocation | null;
  /** When the first completion of its processing was announced (conversation-created); null until then. */
  firstProcessedAt: string | null;
  /** Installed apps' replies to its conversation-created webhook, in the order they arrived. */
  appsResults: AppResult[];
  /** Present only when segments were asked for. */
  segments?: SegmentRecord[];
}

/** An app's reply `{"message": …}` to a conversation-created webhook, as the compatible system keeps it. */
export interface AppResult {
  app_id: string;
  content: string;
}

export interface NewConversation {
  userId: string;
  status: ConversationStatus;
  startedAt: string;
  finishedAt: string | null;
  source: string | null;
  language: string | null;
  textSource?: TextSource | null;
  textSourceSpec?: string | null;
  geolocation?: Geolocation | null;
  segments?: readonly SegmentInput[];
  now: number;
}

export interface ListFilter {
  /** Inclusive lower bound on started_at (ISO 8601 UTC). */
  startDate?: string;
  /** Inclusive upper bound on started_at (ISO 8601 UTC). */
  endDate?: string;
  categories?: readonly string[];
  limit: number;
  offset: number;
  includeSegments: boolean;
  /** Only conversations in this folder. */
  folderId?: string;
}

interface Row {
  id: string;
  user_id: string;
  status: string;
  created_at: string;
  updated_at: string;
  started_at: string;
  finished_at: string | null;
  source: string | null;
  language: string | null;
  text_source: string | null;
  text_source_spec: string | null;
  title: string;
  overview: string;
  emoji: string;
  category: string;
  structured_extra: string;
  produced_by: string | null;
  discarded: unknown;
  deleted: unknown;
  visibility: string;
  folder_id: string | null;
  folder_name?: string | null;
  geolocation: string | null;
  first_processed_at?: string | null;
  apps_results?: string | null;
}

interface SegmentRow {
  conversation_id: string;
  position: number;
  id: string;
  text: string;
  speaker: string;
  speaker_id: number | null;
  is_user: unknown;
  person_id: string | null;
  start: number | string;
  end: number | string;
  stt_provider: string | null;
  speech_profile_processed: unknown;
  /** JSON array of SegmentTranslation; written only by updateSegmentTranslations(), so a rewritten row has none. */
  translations?: string | null;
}

const toRecord = (r: Row): ConversationRecord => {
  const extra = JSON.parse(r.structured_extra) as { action_items?: ActionItemView[]; events?: EventView[] };
  return {
    id: r.id,
    userId: r.user_id,
    status: r.status as ConversationStatus,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
    startedAt: r.started_at,
    finishedAt: r.finished_at,
    source: r.source,
    language: r.language,
    textSource: r.text_source as TextSource | null,
    textSourceSpec: r.text_source_spec,
    title: r.title,
    overview: r.overview,
    emoji: r.emoji,
    category: r.category as ConversationCategory,
    actionItems: extra.action_items ?? [],
    events: extra.events ?? [],
    producedBy: r.produced_by,
    discarded: bool(r.discarded),
    deleted: bool(r.deleted),
    visibility: r.visibility,
    folderId: r.folder_id,
    folderName: r.folder_name ?? null,
    geolocation: r.geolocation ? (JSON.parse(r.geolocation) as Geolocation) : null,
    firstProcessedAt: r.first_processed_at ?? null,
    appsResults: r.apps_results ? (JSON.parse(r.apps_results) as AppResult[]) : [],
  };
};

const toSegment = (r: SegmentRow): SegmentRecord => ({
  id: r.id,
  text: r.text,
  speaker: r.speaker,
  speakerId: r.speaker_id,
  isUser: bool(r.is_user),
  personId: r.person_id,
  // PostgreSQL returns double precision as a number, but be safe with drivers that return text.
  start: Number(r.start),
  end: Number(r.end),
  sttProvider: r.stt_provider,
  speechProfileProcessed: bool(r.speech_profile_processed),
  ...(r.translations ? { translations: JSON.parse(r.translations) as SegmentTranslation[] } : {}),
});

/** A segment as MANY_WITH_SEGMENTS_JSON_SQL gives it: a SegmentRow's values in the order it lists them. */
type SegmentTuple = [string, string, string, number | null, unknown, string | null, string, string, string | null, unknown, string | null];

/** The columns a Row holds (c.* and the folder's name), for the JSON read below. */
const ROW_COLUMNS = ['id', 'user_id', 'status', 'created_at', 'updated_at', 'started_at', 'finished_at', 'source', 'language', 'text_source', 'text_source_spec', 'title', 'overview', 'emoji', 'category', 'structured_extra', 'produced_by', 'discarded', 'deleted', 'visibility', 'folder_id', 'geolocation', 'first_processed_at', 'apps_results'] as const;

/**
 * sqlite: conversations and their segments, each as two JSON texts (the row as an object, the segments as an array
 * of arrays in order). Rationale: the driver builds a JS value per column of each row on the main thread (~0.3 µs
 * each), where a JSON text is parsed at V8's speed. The segments are aggregated as the primary key's order walks
 * them (no sort); start and end go as 17 significant digits, which give back the stored double exactly (sqlite's
 * JSON keeps 15). The conversation's columns are text and integers, which JSON gives back unchanged.
 */
const MANY_WITH_SEGMENTS_JSON_SQL = `SELECT json_object(${ROW_COLUMNS.map((c) => `'${c}', c.${c}`).join(', ')}, 'folder_name', f.name) AS conversation,
  (SELECT json_group_array(json_array(id, text, speaker, speaker_id, is_user, person_id, printf('%!.17g', start), printf('%!.17g', "end"), stt_provider, speech_profile_processed, translations))
    FROM (SELECT * FROM conversation_segments AS s WHERE s.conversation_id = c.id ORDER BY s.position)) AS segments
FROM conversations AS c LEFT JOIN folders AS f ON f.id = c.folder_id WHERE c.id IN (SELECT value FROM json_each(?)) AND c.deleted = ?`;

/** The same record toSegment() makes of the row (one place for the columns' conversions). */
const fromTuple = (t: SegmentTuple): SegmentRecord =>
  toSegment({ conversation_id: '', position: 0, id: t[0], text: t[1], speaker: t[2], speaker_id: t[3], is_user: t[4], person_id: t[5], start: t[6], end: t[7], stt_provider: t[8], speech_profile_processed: t[9], translations: t[10] });

/** The label's number: SPEAKER_01 → 1. */
export function speakerNumber(label: string | undefined): number | null {
  const m = /(\d+)$/.exec(label ?? '');
  return m ? Number(m[1]) : null;
}

function segmentRow(conversationId: string, position: number, s: SegmentInput): SegmentRow {
  const speaker = s.speaker ?? 'SPEAKER_00';
  return {
    conversation_id: conversationId,
    position,
    id: s.id ?? randomUUID(),
    text: s.text,
    speaker,
    speaker_id: s.speakerId ?? speakerNumber(speaker),
    is_user: s.isUser ?? false,
    person_id: s.personId ?? null,
    start: s.start,
    end: s.end,
    stt_provider: s.sttProvider ?? null,
    speech_profile_processed: s.speechProfileProcessed ?? false,
  };
}

/** Segment rows per knex-built INSERT (create, append): sqlite allows 999 bound variables per statement (12 columns a row). */
const SEGMENT_ROWS_PER_INSERT = 50;
const SEGMENT_COLUMNS = ['conversation_id', 'position', 'id', 'text', 'speaker', 'speaker_id', 'is_user', 'person_id', 'start', 'end', 'stt_provider', 'speech_profile_processed'] as const;

function segmentValues(r: SegmentRow): RowValue[] {
  return SEGMENT_COLUMNS.map((c) => r[c] as RowValue);
}

/** A conversation's last segments, and the position of the first of them (positions run 0, 1, 2, … without gaps). */
export interface SegmentTail {
  base: number;
  segments: SegmentRecord[];
}

/** One replaceSegmentsFrom() call. */
interface TailWrite {
  conversationId: string;
  position: number;
  segments: readonly SegmentInput[];
  now: number;
  /** Write only while the conversation is `in_progress` (the live loop's writes); otherwise change nothing. */
  onlyInProgress: boolean;
}

/** Writes one tail; false when `onlyInProgress` and the conversation was no longer in progress (nothing written). */
async function writeTail(run: TransactionRun, w: TailWrite): Promise<boolean> {
  // For the live loop the status check rides in the activity-time update: no read before each write, no window between.
  if ((await touchAll(run, [w], w.onlyInProgress)) === 0 && w.onlyInProgress) return false;
  await replaceTails(run, [w]);
  return true;
}

/**
 * The tail writes of one group commit, as a fixed handful of statements whatever their number: one activity-time
 * update per kind of write (each conversation's own time, by CASE), one DELETE of every replaced tail, and the new rows
 * in shared INSERTs.
 *
 * Rationale: on sqlite each statement is a hop through the libuv thread pool, and each hop wakes a thread at a cost
 * to the main thread, so the statement count must not grow with the sessions. A write whose conversation ended (the
 * update matches fewer rows than it names) or two writes to one conversation go statement by statement, in order.
 */
async function writeTails(run: TransactionRun, writes: readonly TailWrite[]): Promise<boolean[]> {
  if (writes.length > 1 && new Set(writes.map((w) => w.conversationId)).size === writes.length) {
    const live = writes.filter((w) => w.onlyInProgress);
    const always = writes.filter((w) => !w.onlyInProgress);
    if (always.length > 0) await touchAll(run, always, false);
    // Fewer rows touched than live writes: some conversation ended elsewhere and its write must change nothing. The
    // one-by-one path below finds out which (touching the others again with the same time changes nothing).
    if (live.length === 0 || (await touchAll(run, live, true)) === live.length) {
      await replaceTails(run, writes);
      return writes.map(() => true);
    }
  }
  const out: boolean[] = [];
  for (const w of writes) out.push(await writeTail(run, w));
  return out;
}

/**
 * PostgreSQL: `writes` repeated at the end up to the next power of two, so a statement's text depends only on its
 * length rounded up (a repeated term changes nothing). sqlite takes the terms as one JSON array (json_each) in one
 * text whatever their number, because it keeps every text prepared on each connection and one text per length would
 * add up over the kinds of statement and the connections.
 */
function padded(writes: readonly TailWrite[]): readonly TailWrite[] {
  const n = 2 ** Math.ceil(Math.log2(writes.length));
  return n === writes.length ? writes : [...writes, ...Array.from({ length: n - writes.length }, () => writes[writes.length - 1]!)];
}

const ONLY_IN_PROGRESS = ` AND status = '${ConversationStatus.IN_PROGRESS}'`;
/**
 * sqlite: the unary `+` keeps the status index out of the plan. With it, sqlite walks every in-progress conversation
 * and scans the JSON terms for each (conversations × writes); without it, each term looks its conversation up by id.
 */
const ONLY_IN_PROGRESS_SQLITE = ` AND +status = '${ConversationStatus.IN_PROGRESS}'`;
/** sqlite: the terms as `[[id, value], …]` in the one bound value (the query plans look each id up by its index). */
const TOUCH_JSON = `UPDATE conversations SET updated_at = json_extract(j.value, '$[1]') FROM json_each(?) AS j WHERE conversations.id = json_extract(j.value, '$[0]')`;
/** The live loop's activity-time update on sqlite (exported for the test of its query plan). */
export const LIVE_TOUCH_SQLITE = TOUCH_JSON + ONLY_IN_PROGRESS_SQLITE;
const DELETE_TAILS_JSON =
  'DELETE FROM conversation_segments WHERE rowid IN (SELECT s.rowid FROM json_each(?) AS j JOIN conversation_segments AS s ' +
  "ON s.conversation_id = json_extract(j.value, '$[0]') AND s.position >= json_extract(j.value, '$[1]'))";

/** Moves the activity time of each write's conversation to its own `now`; resolves to the rows changed. */
function touchAll(run: TransactionRun, writes: readonly TailWrite[], onlyInProgress: boolean): Promise<number> {
  if (run.sqlite) return run(onlyInProgress ? LIVE_TOUCH_SQLITE : TOUCH_JSON, [JSON.stringify(writes.map((w) => [w.conversationId, isoNow(w.now)]))]);
  const terms = padded(writes);
  const cases = repeat(terms.length, 'WHEN ? THEN ?', ' ');
  const sql = `UPDATE conversations SET updated_at = CASE id ${cases} END WHERE id IN (${repeat(terms.length, '?')})${onlyInProgress ? ONLY_IN_PROGRESS : ''}`;
  return run(sql, [...terms.flatMap((w) => [w.conversationId, isoNow(w.now)]), ...terms.map((w) => w.conversationId)]);
}

/** Deletes each write's tail from its position on and inserts its segments there (the conversations are distinct). */
async function replaceTails(run: TransactionRun, writes: readonly TailWrite[]): Promise<void> {
  if (run.sqlite) await run(DELETE_TAILS_JSON, [JSON.stringify(writes.map((w) => [w.conversationId, w.position]))]);
  else {
    const terms = padded(writes);
    await run(
      `DELETE FROM conversation_segments WHERE ${repeat(terms.length, '(conversation_id = ? AND position >= ?)', ' OR ')}`,
      terms.flatMap((w) => [w.conversationId, w.position]),
    );
  }
  const rows = writes.flatMap((w) => w.segments.map((seg, j) => segmentValues(segmentRow(w.conversationId, w.position + j, seg))));
  await runInserts(run, 'conversation_segments', SEGMENT_COLUMNS, rows);
}

const UPDATE_TRANSLATIONS_SQL = 'UPDATE conversation_segments SET translations = ? WHERE conversation_id = ? AND id = ? AND text = ?';

/** Columns a query selects: the conversation plus its folder's name. */
const COLUMNS = ['c.*', 'f.name as folder_name'];
/** `#base()` as SQL, for the prepared reads of the live path. */
const SELECT_WITH_FOLDER = `SELECT ${COLUMNS.join(', ')} FROM conversations AS c LEFT JOIN folders AS f ON f.id = c.folder_id`;
/** The columns `create` sets (the others take their defaults). */
const CONVERSATION_INSERT_COLUMNS = ['id', 'user_id', 'status', 'created_at', 'updated_at', 'started_at', 'finished_at', 'source', 'language', 'text_source', 'text_source_spec', 'geolocation'] as const;
const INSERT_CONVERSATION_SQL = insertRowsSql('conversations', CONVERSATION_INSERT_COLUMNS, 1);

export class ConversationsRepository {
  readonly #tailWrites: GroupCommit<TailWrite, boolean>;

  /** @param now ms, for the transcript writes' backlog (tailWriteBacklogMs) */
  constructor(private readonly knex: Knex, now?: () => number) {
    this.#tailWrites = new GroupCommit<TailWrite, boolean>(knex, writeTails, undefined, now);
  }

  /**
   * How long the oldest live-transcript write not yet committed has waited, in ms (GroupCommit.backlogMs): a store
   * that cannot keep up with the node's sessions shows here first.
   */
  tailWriteBacklogMs(): number {
    return this.#tailWrites.backlogMs();
  }

  /** Live-transcript writes not yet committed (GroupCommit.pending). */
  tailWritesPending(): number {
    return this.#tailWrites.pending();
  }

  #base(db: Knex | Knex.Transaction = this.knex): Knex.QueryBuilder {
    return db('conversations as c').leftJoin('folders as f', 'f.id', 'c.folder_id').select(COLUMNS);
  }

  /** Inserts a conversation (a live stub with `in_progress`, or a developer upload with `processing`) with its first segments. */
  async create(input: NewConversation): Promise<ConversationRecord> {
    const now = isoNow(input.now);
    const id = randomUUID();
    const row: Record<(typeof CONVERSATION_INSERT_COLUMNS)[number], Knex.Value> = {
      id,
      user_id: input.userId,
      status: input.status,
      created_at: now,
      updated_at: now,
      started_at: input.startedAt,
      finished_at: input.finishedAt,
      source: input.source,
      language: input.language,
      text_source: input.textSource ?? null,
      text_source_spec: input.textSourceSpec ?? null,
      geolocation: input.geolocation ? JSON.stringify(input.geolocation) : null,
    };
    const values = CONVERSATION_INSERT_COLUMNS.map((c) => row[c]);
    const segments = input.segments ?? [];
    // Every live session opens one of these: without segments it is one prepared statement, not a knex transaction.
    if (segments.length === 0) await execute(this.knex, INSERT_CONVERSATION_SQL, values);
    else {
      await this.knex.transaction(async (trx) => {
        await trx.raw(INSERT_CONVERSATION_SQL, values);
        await this.#insertSegments(trx, id, 0, segments);
      });
    }
    return (await this.getById(id))!;
  }

  async #insertSegments(trx: Knex.Transaction, conversationId: string, from: number, segments: readonly SegmentInput[]): Promise<void> {
    const rows = segments.map((s, i) => segmentRow(conversationId, from + i, s));
    for (let i = 0; i < rows.length; i += SEGMENT_ROWS_PER_INSERT) await trx('conversation_segments').insert(rows.slice(i, i + SEGMENT_ROWS_PER_INSERT));
  }

  /** Appends segments after the last one; returns the position of the first appended. */
  async appendSegments(conversationId: string, segments: readonly SegmentInput[], now: number): Promise<number> {
    return this.knex.transaction(async (trx) => {
      const row = (await trx('conversation_segments').where({ conversation_id: conversationId }).max({ p: 'position' }).first()) as { p: number | null } | undefined;
      const from = row?.p === null || row?.p === undefined ? 0 : Number(row.p) + 1;
      await this.#insertSegments(trx, conversationId, from, segments);
      await trx('conversations').where({ id: conversationId }).update({ updated_at: isoNow(now) });
      return from;
    });
  }

  /**
   * Replaces every segment from `position` on (the live engine rewrites the tail as the provider revises it). Runs every
   * 600 ms per talking session: statements prepared once per connection (engine/db/prepared.ts), and writes of
   * several sessions that queue up share one transaction (engine/db/group-commit.ts).
   */
  async replaceSegmentsFrom(conversationId: string, position: number, segments: readonly SegmentInput[], now: number): Promise<void> {
    await this.#tailWrites.submit({ conversationId, position, segments, now, onlyInProgress: false });
  }

  /**
   * replaceSegmentsFrom() while the conversation is still `in_progress`, checked in the same transaction; resolves to
   * false, having written nothing, once it has ended (POST /v1/conversations, the timeout on another node, a delete).
   */
  replaceInProgressSegmentsFrom(conversationId: string, position: number, segments: readonly SegmentInput[], now: number): Promise<boolean> {
    return this.#tailWrites.submit({ conversationId, position, segments, now, onlyInProgress: true });
  }



  /** Whether the conversation is still `in_progress` (the live loop asks before each write: it may have ended elsewhere). */
  async isInProgress(id: string): Promise<boolean> {
    const rows = await select<{ status: string }>(this.knex, 'SELECT status FROM conversations WHERE id = ?', [id]);
    return rows[0]?.status === ConversationStatus.IN_PROGRESS;
  }

  /**
   * Sets `is_user` / `person_id` of the named segments (speaker_assigned on stored segments); others are untouched.
   * `updated_at` stays: it is the conversation's last activity, and an assignment is not speech.
   */
  async updateSegmentSpeakers(conversationId: string, segments: readonly Pick<SegmentRecord, 'id' | 'isUser' | 'personId' | 'speechProfileProcessed'>[]): Promise<void> {
    if (segments.length === 0) return;
    await this.knex.transaction(async (trx) => {
      for (const s of segments) {
        await trx('conversation_segments').where({ conversation_id: conversationId, id: s.id }).update({ is_user: s.isUser, person_id: s.personId, speech_profile_processed: s.speechProfileProcessed });
      }
    });
  }

  /**
   * Sets the translations of the named segments, each only while its text is still the text that was translated (a
   * merge may have changed it meanwhile; its new text gets its own translation). Resolves to the rows changed.
   */
  async updateSegmentTranslations(conversationId: string, items: readonly { id: string; text: string; translations: readonly SegmentTranslation[] }[]): Promise<number> {
    let changed = 0;
    for (const s of items) {
      changed += await execute(this.knex, UPDATE_TRANSLATIONS_SQL, [JSON.stringify(s.translations), conversationId, s.id, s.text]);
    }
    return changed;
  }

  /** Attaches a photo; moves `updated_at` (a photo is activity, like a segment). */
  async addPhoto(conversationId: string, bytes: Uint8Array, now: number): Promise<PhotoRecord> {
    const record: PhotoRecord = { id: randomUUID(), conversationId, createdAt: isoNow(now), bytes: Buffer.from(bytes), contentType: sniffImageType(bytes), size: bytes.byteLength };
    await this.knex.transaction(async (trx) => {
      await trx('conversation_photos').insert({ id: record.id, conversation_id: conversationId, created_at: record.createdAt, bytes: record.bytes, content_type: record.contentType, size: record.size });
      await trx('conversations').where({ id: conversationId }).update({ updated_at: record.createdAt });
    });
    return record;
  }

  /** The conversation's photos, oldest first. */
  async photos(conversationId: string): Promise<PhotoRecord[]> {
    const rows = (await this.knex('conversation_photos').where({ conversation_id: conversationId }).orderBy([{ column: 'created_at' }, { column: 'id' }])) as {
      id: string;
      conversation_id: string;
      created_at: string;
      bytes: Buffer;
      content_type: string;
      size: number | string;
    }[];
    return rows.map((r) => ({ id: r.id, conversationId: r.conversation_id, createdAt: r.created_at, bytes: Buffer.from(r.bytes), contentType: r.content_type, size: Number(r.size) }));
  }

  /** How many photos the conversation has (an ended conversation with photos is not empty). */
  async photoCount(conversationId: string): Promise<number> {
    const [row] = await select<{ n: number | string }>(this.knex, 'SELECT COUNT(*) AS n FROM conversation_photos WHERE conversation_id = ?', [conversationId]);
    return Number(row?.n ?? 0);
  }

  /** Whether the conversation has a transcript segment or a photo: what ending it keeps (not the rows themselves). */
  async hasContent(conversationId: string): Promise<boolean> {
    const [row] = await select<{ n: number | string }>(
      this.knex,
      'SELECT (SELECT COUNT(*) FROM (SELECT 1 FROM conversation_segments WHERE conversation_id = ? LIMIT 1) s) + (SELECT COUNT(*) FROM (SELECT 1 FROM conversation_photos WHERE conversation_id = ? LIMIT 1) p) AS n',
      [conversationId, conversationId],
    );
    return Number(row?.n ?? 0) > 0;
  }

  async segments(conversationId: string): Promise<SegmentRecord[]> {
    const rows = await select<SegmentRow>(this.knex, 'SELECT * FROM conversation_segments WHERE conversation_id = ? ORDER BY position', [conversationId]);
    return rows.map(toSegment);
  }

  /**
   * The last `n` segments in order and the position of the first of them: the live loop keeps only a conversation's
   * tail in memory (the merge never reaches further back), so a day-long conversation costs a session no more than a short one.
   */
  async tailSegments(conversationId: string, n: number): Promise<SegmentTail> {
    const rows = (await this.knex('conversation_segments').where({ conversation_id: conversationId }).orderBy('position', 'desc').limit(n)) as SegmentRow[];
    rows.reverse();
    return { base: rows.length > 0 ? Number(rows[0]!.position) : 0, segments: rows.map(toSegment) };
  }

  /** The named segments of a conversation (any order); ids that are not its segments are left out. */
  async segmentsWithIds(conversationId: string, ids: readonly string[]): Promise<SegmentRecord[]> {
    const out: SegmentRecord[] = [];
    // sqlite binds at most 999 variables per statement.
    for (let i = 0; i < ids.length; i += 500) {
      const rows = (await this.knex('conversation_segments').where({ conversation_id: conversationId }).whereIn('id', ids.slice(i, i + 500)).orderBy('position')) as SegmentRow[];
      out.push(...rows.map(toSegment));
    }
    return out;
  }

  async setStatus(id: string, status: ConversationStatus, now: number, extra: { finishedAt?: string } = {}): Promise<void> {
    await this.knex('conversations')
      .where({ id })
      .update({ status, updated_at: isoNow(now), ...(extra.finishedAt ? { finished_at: extra.finishedAt } : {}) });
  }

  /**
   * Stores a processor result and marks the conversation completed; false when the conversation is gone (deleted, or
   * its account, while it was processed).
   */
  async saveResult(id: string, result: ProcessResult, now: number): Promise<boolean> {
    const at = isoNow(now);
    const s = result.structured;
    const extra = {
      action_items: s.actionItems.map((a): ActionItemView => ({ description: a.description, completed: false, completed_at: null, conversation_id: id, created_at: at, due_at: a.dueAt, updated_at: at })),
      events: s.events.map((e): EventView => ({ title: e.title, start: e.start, description: e.description, duration: e.duration, created: false })),
    };
    const n = await execute(
      this.knex,
      'UPDATE conversations SET status = ?, title = ?, overview = ?, emoji = ?, category = ?, structured_extra = ?, produced_by = ?, discarded = ?, updated_at = ? WHERE id = ?',
      [ConversationStatus.COMPLETED, s.title, s.overview, s.emoji, s.category, JSON.stringify(extra), result.producedBy, result.discarded, at, id],
    );
    return n > 0;
  }

  /**
   * Stores an app's reply, replacing an earlier one of the same app; false when the conversation is gone. A
   * compare-and-set on the whole array, so replies of several apps arriving at once all stay.
   */
  async addAppResult(id: string, result: AppResult): Promise<boolean> {
    for (;;) {
      const row = (await this.knex('conversations').where({ id }).first('apps_results')) as { apps_results: string | null } | undefined;
      if (!row) return false;
      const prior = row.apps_results ?? '';
      const list = (prior ? (JSON.parse(prior) as AppResult[]) : []).filter((r) => r.app_id !== result.app_id);
      list.push(result);
      const n = await execute(this.knex, "UPDATE conversations SET apps_results = ? WHERE id = ? AND COALESCE(apps_results, '') = ?", [JSON.stringify(list), id, prior]);
      if (n > 0) return true;
    }
  }

  /** Records the conversation's first completion as announced; false when it already was (another node, a rerun). */
  async markFirstProcessed(id: string, now: number): Promise<boolean> {
    return (await execute(this.knex, 'UPDATE conversations SET first_processed_at = ? WHERE id = ? AND first_processed_at IS NULL', [isoNow(now), id])) > 0;
  }

  /** Completed conversations whose first completion was never announced (a crash between the two), at most `limit`. */
  async completedUnannounced(limit: number): Promise<{ id: string; userId: string; discarded: boolean }[]> {
    const rows = (await this.knex('conversations')
      .whereNull('first_processed_at')
      .andWhere({ status: ConversationStatus.COMPLETED, deleted: false })
      .orderBy([{ column: 'updated_at' }, { column: 'id' }])
      .limit(limit)
      .select('id', 'user_id', 'discarded')) as { id: string; user_id: string; discarded: unknown }[];
    return rows.map((r) => ({ id: r.id, userId: r.user_id, discarded: bool(r.discarded) }));
  }

  /** Ids and owners of every conversation in `status`, oldest change first, at most `limit` (a jobs node's start-up scan). */
  async allWithStatus(status: ConversationStatus, limit: number): Promise<{ id: string; userId: string }[]> {
    const rows = (await this.knex('conversations').where({ status, deleted: false }).orderBy([{ column: 'updated_at' }, { column: 'id' }]).limit(limit).select('id', 'user_id')) as { id: string; user_id: string }[];
    return rows.map((r) => ({ id: r.id, userId: r.user_id }));
  }

  /** The user's newest conversation in `status` (live sessions resume their `in_progress` one). */
  async latestWithStatus(userId: string, status: ConversationStatus): Promise<ConversationRecord | undefined> {
    const [row] = await select<Row>(this.knex, `${SELECT_WITH_FOLDER} WHERE c.user_id = ? AND c.status = ? AND c.deleted = ? ORDER BY c.updated_at DESC, c.id DESC LIMIT 1`, [userId, status, false]);
    return row ? toRecord(row) : undefined;
  }

  /** Ids of the user's conversations in `status`. */
  async idsWithStatus(userId: string, status: ConversationStatus): Promise<string[]> {
    const rows = (await this.knex('conversations').where({ user_id: userId, status, deleted: false }).select('id')) as { id: string }[];
    return rows.map((r) => r.id);
  }

  /** Moves `id` from status `from` to `to` only if it is still in `from`; true when this call made the change. */
  async transition(id: string, from: ConversationStatus, to: ConversationStatus, now: number, extra: { finishedAt?: string } = {}): Promise<boolean> {
    const n = extra.finishedAt
      ? await execute(this.knex, 'UPDATE conversations SET status = ?, updated_at = ?, finished_at = ? WHERE id = ? AND status = ?', [to, isoNow(now), extra.finishedAt, id, from])
      : await execute(this.knex, 'UPDATE conversations SET status = ?, updated_at = ? WHERE id = ? AND status = ?', [to, isoNow(now), id, from]);
    return n > 0;
  }

  /** Deletes a conversation and its transcript whoever owns it (an empty live conversation is deleted, not processed). */
  async deleteById(id: string): Promise<void> {
    await this.knex.transaction(async (trx) => {
      await trx('conversation_segments').where({ conversation_id: id }).delete();
      await trx('conversation_photos').where({ conversation_id: id }).delete();
      await trx('conversations').where({ id }).delete();
    });
  }

  /** Any conversation by id, whoever owns it (jobs); routes use `get`. */
  async getById(id: string): Promise<ConversationRecord | undefined> {
    const [row] = await select<Row>(this.knex, `${SELECT_WITH_FOLDER} WHERE c.id = ?`, [id]);
    return row ? toRecord(row) : undefined;
  }

  /** One of the user's conversations (not deleted), optionally with its segments. */
  async get(userId: string, id: string, opts: { includeSegments?: boolean } = {}): Promise<ConversationRecord | undefined> {
    const [row] = await select<Row>(this.knex, `${SELECT_WITH_FOLDER} WHERE c.id = ? AND c.user_id = ? AND c.deleted = ?`, [id, userId, false]);
    if (!row) return undefined;
    const record = toRecord(row);
    if (opts.includeSegments) record.segments = await this.segments(id);
    return record;
  }

  /**
   * `get` with segments for many conversations at once, in two reads whatever their number (webhook deliveries build
   * their bodies by the group): the ones found, each its owner's and not deleted, by id.
   */
  async getManyWithSegments(refs: readonly { userId: string; id: string }[]): Promise<Map<string, ConversationRecord>> {
    const out = new Map<string, ConversationRecord>();
    if (refs.length === 0) return out;
    const ids = JSON.stringify([...new Set(refs.map((r) => r.id))]);
    const owner = new Map(refs.map((r) => [r.id, r.userId]));
    if (keepsStatements(this.knex)) {
      for (const r of await select<{ conversation: string; segments: string }>(this.knex, MANY_WITH_SEGMENTS_JSON_SQL, [ids, false])) {
        const row = JSON.parse(r.conversation) as Row;
        if (owner.get(row.id) === row.user_id) out.set(row.id, { ...toRecord(row), segments: (JSON.parse(r.segments) as SegmentTuple[]).map(fromTuple) });
      }
      return out;
    }
    const rows = await select<Row>(this.knex, `${SELECT_WITH_FOLDER} WHERE ${inJsonList(this.knex, 'c.id')} AND c.deleted = ?`, [ids, false]);
    for (const row of rows) if (owner.get(row.id) === row.user_id) out.set(row.id, { ...toRecord(row), segments: [] });
    if (out.size === 0) return out;
    const segments = await select<SegmentRow>(this.knex, `SELECT * FROM conversation_segments WHERE ${inJsonList(this.knex, 'conversation_id')} ORDER BY conversation_id, position`, [JSON.stringify([...out.keys()])]);
    for (const row of segments) out.get(row.conversation_id)?.segments!.push(toSegment(row));
    return out;
  }

  /** Completed, kept, not deleted conversations; newest `started_at` first, then id, so pages are stable. */
  async list(userId: string, f: ListFilter): Promise<ConversationRecord[]> {
    const q = this.#base()
      .where({ 'c.user_id': userId, 'c.status': ConversationStatus.COMPLETED, 'c.discarded': false, 'c.deleted': false })
      .orderBy([{ column: 'c.started_at', order: 'desc' }, { column: 'c.id', order: 'desc' }])
      .limit(f.limit)
      .offset(f.offset);
    if (f.startDate) q.andWhere('c.started_at', '>=', f.startDate);
    if (f.endDate) q.andWhere('c.started_at', '<=', f.endDate);
    if (f.categories && f.categories.length > 0) q.whereIn('c.category', [...f.categories]);
    if (f.folderId) q.andWhere('c.folder_id', f.folderId);
    const records = ((await q) as Row[]).map(toRecord);
    if (f.includeSegments && records.length > 0) {
      const rows = (await this.knex('conversation_segments')
        .whereIn('conversation_id', records.map((r) => r.id))
        .orderBy([{ column: 'conversation_id' }, { column: 'position' }])) as SegmentRow[];
      const by = new Map<string, SegmentRecord[]>(records.map((r) => [r.id, []]));
      for (const row of rows) by.get(row.conversation_id)!.push(toSegment(row));
      for (const r of records) r.segments = by.get(r.id) ?? [];
    }
    return records;
  }

  /** Updates the title and/or discarded flag; false when the user has no such conversation. */
  async update(userId: string, id: string, patch: { title?: string; discarded?: boolean }, now: number): Promise<boolean> {
    const changes: Record<string, unknown> = { updated_at: isoNow(now) };
    if (patch.title !== undefined) changes.title = patch.title;
    if (patch.discarded !== undefined) changes.discarded = patch.discarded;
    const n = await this.knex('conversations').where({ id, user_id: userId, deleted: false }).update(changes);
    return n > 0;
  }

  /** Deletes the conversation and its transcript for good; false when the user has no such conversation. */
  async delete(userId: string, id: string): Promise<boolean> {
    const n = await this.knex('conversations').where({ id, user_id: userId }).delete();
    return n > 0;
  }

  /** Puts the conversation into a folder (or none); false when the user has no such conversation. */
  async setFolder(userId: string, id: string, folderId: string | null, now: number): Promise<boolean> {
    const n = await this.knex('conversations').where({ id, user_id: userId, deleted: false }).update({ folder_id: folderId, updated_at: isoNow(now) });
    return n > 0;
  }
}
