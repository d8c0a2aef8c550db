// A session's transcript loop, every 600 ms as in the compatible system: buffered engine segments → conversation time
// → merge → persist, and the silence timeout that ends a conversation (docs/protocol.md).
// One file because the step's parts (placing, merging, persisting, the silence timeout) share the loop's state.
import { randomUUID } from 'node:crypto';
import type { Clock } from '../clock.js';
import type { Logger } from '../logger.js';
import type { ConversationsRepository, SegmentRecord } from '../db/conversations.js';
import { lastActivityMs, type ConversationLifecycle } from '../conversations/lifecycle.js';
import type { SttSegment } from '../stt/types.js';
import { speakerIdOf, type TranscriptSegment } from './segment.js';
import { combineSegments, type CombineResult } from './segments.js';
import type { SpeakerAssignments } from './speakers.js';

export interface BufferLoopOptions {
  uid: string;
  sessionId: string;
  source: string | null;
  language: string;
  /** Seconds without a new segment before the conversation is processed. */
  conversationTimeoutS: number;
  lifecycle: ConversationLifecycle;
  conversations: ConversationsRepository;
  clock: Clock;
  logger: Logger;
  /** The session's speaker_assigned maps: applied to every new segment, and to stored ones named by reassign(). */
  speakers?: SpeakerAssignments;
  /**
   * Most raw segments held between two steps; older ones are dropped past it (the compatible system's deque).
   * @defaultValue 1000
   */
  maxPendingSegments?: number;
}

/** A raw segment as an engine or the app (suggested_transcript) gave it: seconds from the session's first audio. */
export interface RawSegment extends SttSegment {
  personId?: string | null;
  sttProvider: string | null;
  /** Whether the user's speech profile was compared with this segment's voice (speaker identification); absent: no. */
  speechProfileProcessed?: boolean;
}

/** What one step produced for the client. */
export interface StepResult {
  updated: TranscriptSegment[];
  removedIds: string[];
  /** Set when the silence timeout ended the conversation in this step. */
  ended?: { conversationId: string; outcome: string };
}

interface Current {
  id: string;
  startedAtMs: number;
  /**
   * The conversation's last segments (at most RECENT_SEGMENTS): the merge only ever touches the stored tail, and
   * the full transcript is in the store. Bounded, so a session's memory and step cost stay flat however long it talks.
   */
  recent: TranscriptSegment[];
  /** Store position of recent[0]. */
  base: number;
  /** When a segment last arrived (or the conversation was opened/resumed), epoch ms. */
  lastSegmentAtMs: number;
}

/** Completed images held between two steps (the assembler already bounds images in flight to 50). */
const MAX_PENDING_PHOTOS = 50;

/**
 * Segments of the current conversation a session keeps in memory. One would do for the merge; a few more let a
 * speaker_assigned naming recent segments (the usual case: the app labels what it just showed) skip a store read.
 * Eight is a minute or more of speech; every segment kept costs heap for as long as the session talks.
 */
export const RECENT_SEGMENTS = 8;

const EMPTY: StepResult = { updated: [], removedIds: [] };

export class BufferLoop {
  readonly #o: BufferLoopOptions;
  readonly #maxPending: number;
  #pending: RawSegment[] = [];
  /** Epoch ms of the first audio byte (or first suggested transcript): segment times count from here. */
  #streamStartMs: number | undefined;
  /** Audio arrived since the last conversation ended: the next step opens a conversation. */
  #audioSinceEnd = false;
  #current: Current | undefined;
  /** Assembled images waiting for the next step to attach them to the current conversation. */
  #photos: Uint8Array[] = [];
  /** Photos attached to a conversation, and photos dropped because too many waited between two steps. */
  photosStored = 0;
  droppedPhotos = 0;
  /** Stored segment ids a speaker_assigned message named; applied at the next step. */
  #reassigned = new Set<string>();
  /** Speakers identification has a new finding for: their segments in memory are updated at the next step. */
  #reassignedSpeakers = new Set<number>();
  /**
   * Segments a speaker assignment changed and the store holds, not yet returned to the client: a step that fails after
   * storing them (a later write of the step) returns them at the next step that succeeds. By id, the latest version.
   */
  #unsentUpdates = new Map<string, TranscriptSegment>();
  /** Segments dropped because the buffer was full (logged, never silently lost). */
  droppedSegments = 0;

  constructor(opts: BufferLoopOptions) {
    this.#o = opts;
    this.#maxPending = opts.maxPendingSegments ?? 1000;
  }

  get conversationId(): string | undefined {
    return this.#current?.id;
  }

  /** Continues the user's in_progress conversation when it is within the timeout (times stay continuous). */
  async resume(): Promise<void> {
    const r = await this.#o.lifecycle.resume(this.#o.uid, this.#o.conversationTimeoutS, RECENT_SEGMENTS);
    if (!r) return;
    const c = r.conversation;
    this.#current = { id: c.id, startedAtMs: Date.parse(c.startedAt), recent: r.tail.segments.map(fromRecord), base: r.tail.base, lastSegmentAtMs: lastActivityMs(c) };
  }

  /**
   * Where this session's stream time 0 lies in wall-clock time, when it is known before its audio arrives: a resumed
   * session's audio continues the session it resumes, so its words land after the words already stored.
   */
  streamStartsAt(ms: number): void {
    this.#streamStartMs = ms;
  }

  /** Audio (or a suggested transcript) arrived now. */
  noteAudio(): void {
    this.#streamStartMs ??= this.#o.clock.now();
    this.#audioSinceEnd = true;
  }

  add(segments: readonly RawSegment[]): void {
    for (const s of segments) {
      if (typeof s.text !== 'string' || s.text.trim() === '') continue;
      this.#pending.push(s);
    }
    this.#bound();
  }

  /** Segments and photos not yet in the store: the ones a failed step gave back included. */
  get unwritten(): number {
    return this.#pending.length + this.#photos.length;
  }

  #bound(): void {
    if (this.#pending.length > this.#maxPending) {
      const drop = this.#pending.length - this.#maxPending;
      this.#pending.splice(0, drop);
      this.droppedSegments += drop;
      this.#o.logger.warn({ sessionId: this.#o.sessionId, dropped: drop }, 'transcript buffer full: oldest segments dropped');
    }
    if (this.#photos.length > MAX_PENDING_PHOTOS) {
      const drop = this.#photos.length - MAX_PENDING_PHOTOS;
      this.#photos.splice(0, drop);
      this.droppedPhotos += drop;
      this.#o.logger.warn({ sessionId: this.#o.sessionId, dropped: drop }, 'photo buffer full: oldest photo dropped');
    }
  }

  /**
   * Where this session's audio lands: the current conversation (opened now if there is none) and the conversation time
   * of stream time 0, so audio kept for later transcription can be placed exactly.
   */
  async anchor(): Promise<{ conversationId: string; offsetS: number }> {
    const now = this.#o.clock.now();
    if (this.#current && !(await this.#stillInProgress(this.#current.id))) this.#current = undefined;
    const cur = this.#current ?? (await this.#open(now));
    return { conversationId: cur.id, offsetS: ((this.#streamStartMs ?? now) - cur.startedAtMs) / 1000 };
  }

  /** An assembled image: the next step attaches it to the current conversation (opening one if needed). */
  addPhoto(bytes: Uint8Array): void {
    this.#photos.push(bytes);
    this.#bound();
  }

  /**
   * Stored segments of the current conversation named by a speaker_assigned message: the next step applies the
   * assignment to them, persists them and returns them as updated. Done in the step so it never races a merge.
   */
  reassign(segmentIds: readonly string[]): void {
    for (const id of segmentIds) this.#reassigned.add(id);
    // Bounded like the assignment map: ids beyond it were never ours to update in one step anyway.
    if (this.#reassigned.size > 10_000) this.#reassigned = new Set([...this.#reassigned].slice(-10_000));
  }

  /**
   * Speaker identification found who `speakerId` is: the current conversation's segments of that speaker still held
   * in memory (the last RECENT_SEGMENTS, where a speaker's first seconds are) take the finding at the next step.
   */
  reassignSpeaker(speakerId: number): void {
    this.#reassignedSpeakers.add(speakerId);
  }

  /** The id of the current conversation's latest segment of `speakerId` held in memory, if any. */
  lastSegmentOf(speakerId: number): string | undefined {
    const recent = this.#current?.recent ?? [];
    for (let i = recent.length - 1; i >= 0; i--) if (recent[i]!.speakerId === speakerId) return recent[i]!.id;
    return undefined;
  }

  /** Forgets the current conversation when it was ended elsewhere (POST /v1/conversations, another node). */
  conversationEnded(conversationId: string): void {
    if (this.#current?.id === conversationId) this.#current = undefined;
  }

  /**
   * Whether a step now would do anything: segments, photos or speaker assignments to apply, updates to return, the
   * silence timeout due, or audio waiting for a conversation to be opened. False: step() would answer an empty result
   * and change nothing, so the caller may skip it.
   *
   * Rationale: most 600 ms steps find nothing new (a provider answers every second or two), and each step run anyway
   * leaves arrays, a Set and awaited promises that outlive the young generation and die in the old one.
   */
  hasWork(): boolean {
    if (this.#pending.length > 0 || this.#photos.length > 0 || this.#reassigned.size > 0 || this.#reassignedSpeakers.size > 0 || this.#unsentUpdates.size > 0) return true;
    const cur = this.#current;
    return cur ? this.#silentTooLong(cur, this.#o.clock.now()) : this.#audioSinceEnd;
  }

  /** Whether `cur` has had no new segment for the silence timeout: the step ends it. */
  #silentTooLong(cur: Current, now: number): boolean {
    return now - cur.lastSegmentAtMs >= this.#o.conversationTimeoutS * 1000;
  }

  /**
   * One 600 ms step. Never runs twice at once: the actor awaits it before the next. When the store fails (sqlite
   * busy past its timeout, PostgreSQL unreachable) it throws, and whatever it had not written goes back, before what
   * arrived meanwhile, for the next step to try again: segments, photos not yet attached, speaker assignments, and the
   * silence timeout's end of the conversation.
   */
  async step(): Promise<StepResult> {
    const batch = this.#pending;
    this.#pending = [];
    const photos = this.#photos;
    this.#photos = [];
    const reassign = this.#reassigned;
    this.#reassigned = new Set();
    const speakers = this.#reassignedSpeakers;
    this.#reassignedSpeakers = new Set();
    try {
      return await this.#step(batch, photos, reassign, speakers);
    } catch (err) {
      this.#pending = batch.concat(this.#pending);
      this.#photos = photos.concat(this.#photos);
      for (const id of this.#reassigned) reassign.add(id);
      this.#reassigned = reassign;
      for (const id of this.#reassignedSpeakers) speakers.add(id);
      this.#reassignedSpeakers = speakers;
      this.#bound();
      throw err;
    }
  }

  /** step() with what it took: `photos` loses each photo once stored, `reassign` and `speakers` are emptied once applied. */
  async #step(batch: RawSegment[], photos: Uint8Array[], reassign: Set<string>, speakers: Set<number>): Promise<StepResult> {
    const now = this.#o.clock.now();
    await this.#applyReassigned(reassign, speakers);
    if (batch.length === 0 && photos.length === 0) {
      const cur = this.#current;
      if (cur && this.#silentTooLong(cur, now)) {
        const audioSinceEnd = this.#audioSinceEnd;
        this.#current = undefined;
        this.#audioSinceEnd = false;
        try {
          const outcome = await this.#o.lifecycle.end(cur.id, this.#o.uid);
          return { updated: this.#takeUnsent(), removedIds: [], ended: { conversationId: cur.id, outcome } };
        } catch (err) {
          // Not ended: the next step ends it (unless something moved on meanwhile).
          if (this.#current === undefined) [this.#current, this.#audioSinceEnd] = [cur, audioSinceEnd || this.#audioSinceEnd];
          throw err;
        }
      }
      if (!cur && this.#audioSinceEnd) await this.#open(now);
      return this.#unsentOnly();
    }
    // Photos check the conversation first; segment writes check it in their own transaction (below).
    if (photos.length > 0 && this.#current && !(await this.#stillInProgress(this.#current.id))) this.#current = undefined;
    let cur = this.#current ?? (await this.#open(now));
    if (photos.length > 0) {
      while (photos.length > 0) {
        await this.#o.conversations.addPhoto(cur.id, photos[0]!, now);
        photos.shift();
        this.photosStored++;
      }
      // A photo is activity: like a segment, it keeps the conversation open (the compatible system moves finished_at for both).
      cur.lastSegmentAtMs = now;
      if (batch.length === 0) return this.#unsentOnly();
    }
    const conversations = this.#o.conversations;
    let merged = this.#merge(cur, batch, now);
    const from = firstChanged(cur.recent, merged.updated, merged.removedIds);
    if (!(await conversations.replaceInProgressSegmentsFrom(cur.id, cur.base + from, merged.segments.slice(from), now))) {
      // Ended elsewhere (another node's timeout, POST /v1/conversations before its event reached us): as after the
      // silence timeout, these segments open the next conversation.
      this.#o.logger.info({ sessionId: this.#o.sessionId, conversationId: cur.id }, 'conversation ended elsewhere; new segments open the next');
      cur = await this.#open(now);
      merged = this.#merge(cur, batch, now);
      await conversations.replaceSegmentsFrom(cur.id, 0, merged.segments, now);
    }
    const drop = Math.max(0, merged.segments.length - RECENT_SEGMENTS);
    cur.recent = drop > 0 ? merged.segments.slice(drop) : merged.segments;
    cur.base += drop;
    cur.lastSegmentAtMs = now;
    // Reassigned stored segments the merge did not touch are sent too; the merge's version of a segment wins.
    const removed = new Set(merged.removedIds);
    const byMerge = new Set(merged.updated.map((s) => s.id));
    const extra = this.#takeUnsent().filter((s) => !byMerge.has(s.id) && !removed.has(s.id));
    return { updated: [...extra, ...merged.updated], removedIds: merged.removedIds };
  }

  /**
   * A manual end: one step puts what waits into the current conversation (opening one for audio that has none yet),
   * then the conversation is ended; the session's next audio opens a new one. `ended` is unset when there was no
   * conversation to end. Run as a step: never at the same time as one.
   */
  async endNow(): Promise<StepResult> {
    const r = await this.step();
    const cur = this.#current;
    if (r.ended || !cur) return r;
    this.#current = undefined;
    this.#audioSinceEnd = false;
    try {
      const outcome = await this.#o.lifecycle.end(cur.id, this.#o.uid);
      return { ...r, ended: { conversationId: cur.id, outcome } };
    } catch (err) {
      // Not ended: the segments are stored; the session goes on recording into it.
      if (this.#current === undefined) this.#current = cur;
      throw err;
    }
  }

  /** The stored speaker updates not yet returned, now returned (#unsentUpdates). */
  #takeUnsent(): TranscriptSegment[] {
    if (this.#unsentUpdates.size === 0) return [];
    const updated = [...this.#unsentUpdates.values()];
    this.#unsentUpdates.clear();
    return updated;
  }

  #unsentOnly(): StepResult {
    return this.#unsentUpdates.size > 0 ? { updated: this.#takeUnsent(), removedIds: [] } : EMPTY;
  }

  /** The batch in `cur`'s time (engine times count from the session's first audio), merged into its stored tail. */
  #merge(cur: Current, batch: readonly RawSegment[], now: number): CombineResult {
    const offsetS = ((this.#streamStartMs ?? now) - cur.startedAtMs) / 1000;
    const speakers = this.#o.speakers;
    const incoming = batch.map((s) => {
      const seg = toSegment(s, offsetS);
      return speakers ? speakers.apply(seg) : seg;
    });
    return combineSegments(cur.recent, incoming);
  }

  /**
   * Applies pending speaker_assigned segment ids to the current conversation's stored segments; the changed ones wait
   * in #unsentUpdates for the step's result.
   */
  async #applyReassigned(ids: Set<string>, speakerIds: Set<number>): Promise<void> {
    if (ids.size === 0 && speakerIds.size === 0) return;
    const cur = this.#current;
    const speakers = this.#o.speakers;
    if (!cur || !speakers) {
      ids.clear();
      speakerIds.clear();
      return;
    }
    const changed: TranscriptSegment[] = [];
    const reassign = (s: TranscriptSegment): TranscriptSegment => {
      if (!ids.has(s.id) && !speakerIds.has(s.speakerId)) return s;
      const next = speakers.apply(s);
      if (next.isUser === s.isUser && next.personId === s.personId && next.speechProfileProcessed === s.speechProfileProcessed) return s;
      changed.push(next);
      return next;
    };
    const recent = cur.recent.map(reassign);
    // Older segments than the ones kept in memory are read from the store.
    const inMemory = new Set(recent.map((s) => s.id));
    const older = [...ids].filter((id) => !inMemory.has(id));
    if (older.length > 0) for (const s of await this.#o.conversations.segmentsWithIds(cur.id, older)) reassign(fromRecord(s));
    if (changed.length > 0) await this.#o.conversations.updateSegmentSpeakers(cur.id, changed);
    // Kept in memory once stored: a failed write leaves both as they were, for the next step to compare again.
    cur.recent = recent;
    ids.clear();
    speakerIds.clear();
    for (const s of changed) this.#unsentUpdates.set(s.id, s);
  }

  async #open(now: number): Promise<Current> {
    const c = await this.#o.lifecycle.open(this.#o.uid, this.#o.source, this.#o.language, this.#streamStartMs ?? now);
    this.#current = { id: c.id, startedAtMs: Math.min(Date.parse(c.startedAt), now), recent: [], base: 0, lastSegmentAtMs: now };
    this.#audioSinceEnd = false;
    return this.#current;
  }

  async #stillInProgress(id: string): Promise<boolean> {
    return this.#o.conversations.isInProgress(id);
  }
}

function toSegment(s: RawSegment, offsetS: number): TranscriptSegment {
  const speaker = s.speaker || 'SPEAKER_00';
  const start = Math.max(0, round3(s.start + offsetS));
  return {
    id: randomUUID(),
    text: s.text,
    speaker,
    speakerId: speakerIdOf(speaker),
    isUser: s.isUser ?? false,
    personId: s.personId ?? null,
    start,
    end: Math.max(start, round3(s.end + offsetS)),
    speechProfileProcessed: s.speechProfileProcessed ?? false,
    sttProvider: s.sttProvider,
  };
}

function fromRecord(r: SegmentRecord): TranscriptSegment {
  return { ...r, speakerId: r.speakerId ?? speakerIdOf(r.speaker) };
}

/** Position of the first stored segment the merge changed or removed; everything from there is rewritten. */
function firstChanged(stored: readonly TranscriptSegment[], updated: readonly TranscriptSegment[], removedIds: readonly string[]): number {
  const touched = new Set([...updated.map((s) => s.id), ...removedIds]);
  const i = stored.findIndex((s) => touched.has(s.id));
  return i === -1 ? stored.length : i;
}

const round3 = (x: number): number => Math.round(x * 1000) / 1000;
