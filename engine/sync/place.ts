// Synced segments into the user's conversations by wall-clock time: segments less than 120 s apart form one stretch;
// a stretch within 120 s of a conversation's span joins it, else starts a new one; a segment whose time a
// conversation's segments already cover (live audio of the same moment, or this file placed before) is left out.
import { randomUUID } from 'node:crypto';
import type { ConversationsRepository, SegmentInput, SegmentRecord } from '../db/conversations.js';
import type { SyncRepository } from '../db/sync-jobs.js';
import { ConversationStatus } from '../protocol.js';
import { speakerIdOf } from '../audio/segment.js';
import type { SttSegment } from '../stt/types.js';

/** A gap of this many seconds or more between audio starts a new conversation, as the compatible system does. */
export const CONVERSATION_GAP_S = 120;
/** A synced segment is left out when existing segments cover at least this share of its time. */
export const COVERED_SHARE = 0.5;
/** How far back a conversation may start and still reach a stretch (a day-long recording). */
const LOOKBACK_MS = 24 * 3600_000;

/** Where synced conversations say they came from: the device's own storage. */
export const SYNC_SOURCE = 'sdcard';

export interface PlaceDeps {
  conversations: ConversationsRepository;
  sync: SyncRepository;
  now: () => number;
}

export interface Placed {
  /** Conversations that received segments, created or joined. */
  conversationIds: string[];
  segments: number;
  skipped: number;
}

interface Abs {
  startMs: number;
  endMs: number;
  seg: SttSegment;
}

/** Splits time-ordered segments where the gap between one's end and the next's start is CONVERSATION_GAP_S or more. */
export function stretches<T extends { startMs: number; endMs: number }>(sorted: readonly T[]): T[][] {
  const out: T[][] = [];
  let reach = -Infinity;
  for (const s of sorted) {
    if (out.length === 0 || s.startMs - reach >= CONVERSATION_GAP_S * 1000) out.push([]);
    out.at(-1)!.push(s);
    reach = Math.max(reach, s.endMs);
  }
  return out;
}

/** Seconds of [start, end] that the stored segments cover (they may overlap one another). */
export function coveredS(start: number, end: number, stored: readonly { start: number; end: number }[]): number {
  const parts = stored
    .filter((s) => s.end > start && s.start < end)
    .map((s) => [Math.max(start, s.start), Math.min(end, s.end)] as const)
    .sort((a, b) => a[0] - b[0]);
  let total = 0;
  let at = start;
  for (const [a, b] of parts) {
    if (b <= at) continue;
    total += b - Math.max(a, at);
    at = b;
  }
  return total;
}

const round3 = (n: number): number => Math.round(n * 1000) / 1000;

function toInput(a: Abs, baseMs: number, provider: string): SegmentInput {
  const speaker = a.seg.speaker || 'SPEAKER_00';
  const start = Math.max(0, round3((a.startMs - baseMs) / 1000));
  return { id: randomUUID(), text: a.seg.text, speaker, speakerId: speakerIdOf(speaker), isUser: a.seg.isUser ?? false, personId: null, start, end: Math.max(start, round3((a.endMs - baseMs) / 1000)), sttProvider: provider, speechProfileProcessed: false };
}

/**
 * Places one file's segments (times from the file's start at `fileStartMs`) into `uid`'s conversations. New
 * conversations are created `processing` and not yet queued: the job queues every conversation it touched once the
 * whole batch is placed, so that a later file of the batch can still join them.
 */
export async function placeSegments(d: PlaceDeps, uid: string, language: string, fileStartMs: number, segments: readonly SttSegment[], provider: string): Promise<Placed> {
  const abs: Abs[] = segments
    .filter((s) => s.text.trim() !== '')
    .map((seg) => ({ startMs: fileStartMs + seg.start * 1000, endMs: fileStartMs + Math.max(seg.start, seg.end) * 1000, seg }))
    .sort((a, b) => a.startMs - b.startMs || a.endMs - b.endMs);
  const ids = new Set<string>();
  let placed = 0;
  let skipped = 0;
  for (const stretch of stretches(abs)) {
    const from = stretch[0]!.startMs;
    const to = Math.max(...stretch.map((s) => s.endMs));
    const gapMs = CONVERSATION_GAP_S * 1000;
    // The conversation whose span comes nearest the stretch, if it is nearer than the gap.
    const near = (await d.sync.spans(uid, from - LOOKBACK_MS, to + gapMs))
      .map((c) => ({ c, distance: Math.max(c.startedAtMs - to, from - (c.startedAtMs + c.lastEndS * 1000), 0) }))
      .filter((x) => x.distance < gapMs)
      .sort((a, b) => a.distance - b.distance)[0]?.c;
    if (!near) {
      const now = d.now();
      const c = await d.conversations.create({
        userId: uid,
        status: ConversationStatus.PROCESSING,
        startedAt: new Date(from).toISOString(),
        finishedAt: new Date(to).toISOString(),
        source: SYNC_SOURCE,
        language,
        textSource: 'audio_transcript',
        segments: stretch.map((a) => toInput(a, from, provider)),
        now,
      });
      ids.add(c.id);
      placed += stretch.length;
      continue;
    }
    let baseMs = near.startedAtMs;
    const stored: SegmentRecord[] = await d.conversations.segments(near.id);
    const fresh = stretch.filter((a) => {
      const s = (a.startMs - baseMs) / 1000;
      const e = (a.endMs - baseMs) / 1000;
      const covered = coveredS(s, e, stored);
      return e - s <= 0 ? covered === 0 && !stored.some((x) => x.start <= s && x.end >= e) : covered / (e - s) < COVERED_SHARE;
    });
    skipped += stretch.length - fresh.length;
    if (fresh.length === 0) {
      // A batch re-run after a crash finds its own conversation: it still has to be queued.
      if (near.status === ConversationStatus.PROCESSING) ids.add(near.id);
      continue;
    }
    if (from < baseMs) {
      // The stretch starts before the conversation: its start moves back, its stored segments' offsets forward.
      const shiftS = round3((baseMs - from) / 1000);
      await d.sync.moveStart(near.id, from, shiftS, d.now());
      for (const s of stored) {
        s.start = round3(s.start + shiftS);
        s.end = round3(s.end + shiftS);
      }
      baseMs = from;
    }
    const all = [...stored, ...fresh.map((a) => toInput(a, baseMs, provider))].sort((a, b) => a.start - b.start || a.end - b.end);
    const first = all.findIndex((s, i) => s !== stored[i]);
    await d.conversations.replaceSegmentsFrom(near.id, first, all.slice(first) as SegmentInput[], d.now());
    ids.add(near.id);
    placed += fresh.length;
  }
  return { conversationIds: [...ids], segments: placed, skipped };
}
