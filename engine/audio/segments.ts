// Merging new engine segments into a conversation's stored transcript, by the compatible system's rules: same-speaker
// runs join, misattributed sentence fragments move across a speaker change, never across providers.
import type { TranscriptSegment } from './segment.js';

export interface CombineResult {
  /** The whole transcript after the merge. */
  segments: TranscriptSegment[];
  /** Segments added or changed by this merge (what the client is sent). */
  updated: TranscriptSegment[];
  /** Ids of stored segments the merge emptied and removed (sent as segments_deleted). */
  removedIds: string[];
}

/** Same-speaker segments further apart than this (seconds) stay separate unless the text continues mid-sentence. */
export const MERGE_GAP_S = 3;
/** A finished sentence at least this long (characters) closes its segment: keeps segments readable. */
export const LONG_TEXT_CHARS = 125;

const SENTENCE_END = /[.?!]$/;

function endsSentence(text: string): boolean {
  return SENTENCE_END.test(text.trimEnd());
}

/** Lowercase means "this continues someone's sentence"; scripts without case (CJK) never count. */
function startsLowercase(text: string): boolean {
  const c = text.trimStart().charAt(0);
  return c !== '' && c === c.toLowerCase() && c !== c.toUpperCase();
}

function sameSpeaker(a: TranscriptSegment, b: TranscriptSegment): boolean {
  return a.speaker === b.speaker || (a.isUser && b.isUser);
}

/** Splits on . ? ! keeping each mark with the sentence it ends; the last piece may be unfinished. */
export function sentences(text: string): string[] {
  const out: string[] = [];
  const re = /[^.?!]*[.?!]+|[^.?!]+$/g;
  for (const m of text.matchAll(re)) {
    const s = m[0].trim();
    if (s !== '') out.push(s);
  }
  return out;
}

/** The providers' spacing quirks (Speechmatics puts spaces before punctuation). */
function clean(text: string): string {
  return text.trim().replace(/ {2,}/g, ' ').replace(/ ,/g, ',').replace(/ \./g, '.').replace(/ \?/g, '?');
}

function join(a: string, b: string): string {
  const left = a.trim();
  const right = b.trim();
  return left === '' ? right : right === '' ? left : `${left} ${right}`;
}

/**
 * Diarization often cuts at the wrong word: the previous speaker's unfinished sentence spills into the next
 * segment, or the next segment opens with the tail of the previous speaker's sentence. The shorter of the two
 * candidate fragments is the misattributed one, so it moves; equal lengths are ambiguous and nothing moves.
 * Mutates `prev` and `next` (both are working copies).
 */
function moveFragment(prev: TranscriptSegment, next: TranscriptSegment): void {
  const prevParts = sentences(prev.text);
  const last = prevParts[prevParts.length - 1];
  const dangling = last !== undefined && !SENTENCE_END.test(last) ? last : '';
  const first = sentences(next.text)[0];
  const continuation = first !== undefined && startsLowercase(first) ? first : '';
  if (dangling === '' || continuation === '') return;

  if (dangling.length < continuation.length) {
    const prevText = prev.text.trimEnd();
    prev.text = prevText.slice(0, prevText.length - dangling.length).trim();
    next.text = join(dangling, next.text);
    // Every word of `prev` now lives in `next`, so `next` starts where `prev` did.
    if (prev.text === '') next.start = Math.min(next.start, prev.start);
  } else if (continuation.length < dangling.length) {
    const nextText = next.text.trimStart();
    next.text = nextText.slice(continuation.length).trim();
    prev.text = join(prev.text, continuation);
    if (next.text === '') prev.end = Math.max(prev.end, next.end);
  }
}

/**
 * Folds `next` onto the end of `out` (working copies, mutated): appends it to the last segment, moves a
 * fragment across a speaker change, or pushes it. A segment emptied by a fragment move is dropped from `out`.
 */
function fold(out: TranscriptSegment[], next: TranscriptSegment): void {
  const prev = out[out.length - 1];
  // Never across providers: their timestamps and diarization labels do not share a scale.
  if (prev === undefined || prev.sttProvider !== next.sttProvider) {
    out.push(next);
    return;
  }
  if (sameSpeaker(prev, next)) {
    const closeEnough =
      prev.speechProfileProcessed === next.speechProfileProcessed &&
      next.start - prev.end < MERGE_GAP_S &&
      (prev.text.length < LONG_TEXT_CHARS || !endsSentence(prev.text));
    const continues = !endsSentence(prev.text) && startsLowercase(next.text);
    if (closeEnough || continues) {
      prev.text = join(prev.text, next.text);
      prev.end = Math.max(prev.end, next.end);
      return;
    }
    out.push(next);
    return;
  }
  moveFragment(prev, next);
  if (prev.text === '') out.pop();
  if (next.text !== '') out.push(next);
}

/**
 * Merges one batch from the engine among itself (step one of the 600 ms loop, before it meets the stored
 * transcript): same-speaker runs join, fragments move across speaker changes. Pure; segments keep the id of
 * the first segment of their run. Segments left with no text are dropped: there is nothing to show.
 */
export function mergeBatch(incoming: readonly TranscriptSegment[]): TranscriptSegment[] {
  const out: TranscriptSegment[] = [];
  for (const s of incoming) fold(out, { ...s });
  return out.map((s) => ({ ...s, text: clean(s.text) })).filter((s) => s.text !== '');
}

/**
 * Merges `incoming` (already shifted to conversation time) into `existing`; pure, never mutates its inputs.
 * Runs {@link mergeBatch} on `incoming` first, then folds the result into a copy of the last stored segment;
 * earlier stored segments are never touched and come back as the same objects (a session merges every 600 ms:
 * copying its recent segments each time made garbage that outlived V8's young generation). The merged tail keeps
 * its stored id; new segments keep theirs. `removedIds` only names stored segments: a new segment emptied inside
 * the batch was never sent to a client. Callers treat every segment as immutable.
 */
export function combineSegments(existing: readonly TranscriptSegment[], incoming: readonly TranscriptSegment[]): CombineResult {
  const batch = mergeBatch(incoming);
  const tailOriginal = existing[existing.length - 1];
  if (batch.length === 0 || tailOriginal === undefined) {
    return { segments: [...existing, ...batch], updated: batch.map((s) => ({ ...s })), removedIds: [] };
  }

  const tail = { ...tailOriginal };
  const out: TranscriptSegment[] = [tail];
  for (const s of batch) fold(out, s);
  for (const s of out) s.text = clean(s.text);

  const removedIds = out[0] === tail ? [] : [tail.id];
  const head = existing.slice(0, -1);
  const tailChanged = tail.text !== tailOriginal.text || tail.start !== tailOriginal.start || tail.end !== tailOriginal.end;
  const updated = out.filter((s) => s !== tail || tailChanged).map((s) => ({ ...s }));
  return { segments: [...head, ...out], updated, removedIds };
}
