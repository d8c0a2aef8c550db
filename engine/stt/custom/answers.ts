// Parses and times the text answers of an external custom transcription server (docs/patterns/custom-stt.md); pure.
import { CUSTOM_STT } from '../../protocol.js';
import type { RawSegment } from '../../audio/buffer-loop.js';

/** One segment as the server sent it; times in seconds from the start of that connection's audio. */
export interface CustomSegment {
  text: string;
  speaker?: string;
  start?: number;
  end?: number;
}

export type CustomAnswer =
  /** A `{segments: […]}` object; `invalid` segments were dropped. */
  | { kind: 'results'; segments: CustomSegment[]; invalid: number }
  /** An object whose `type` is present and is not `Results`: ignored, as the public protocol says. */
  | { kind: 'ignored' }
  /** Not an answer at all: refused and counted. Reasons are machine words, never the server's text. */
  | { kind: 'rejected'; reason: 'malformed_json' | 'raw_array' | 'not_an_object' | 'no_segments' };

/** Longest speaker label kept, in characters; a longer one makes the segment invalid. */
const MAX_SPEAKER_CHARS = 64;

const absent = (v: unknown): boolean => v === undefined || v === null;
const time = (v: unknown): boolean => typeof v === 'number' && Number.isFinite(v) && v >= 0;

/** A segment, or undefined when a field has the wrong type: `text` must be a string, the rest optional. */
function segment(raw: unknown): CustomSegment | undefined {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) return undefined;
  const r = raw as Record<string, unknown>;
  if (typeof r.text !== 'string') return undefined;
  const out: CustomSegment = { text: r.text };
  if (!absent(r.speaker)) {
    if (typeof r.speaker !== 'string' || r.speaker === '' || r.speaker.length > MAX_SPEAKER_CHARS) return undefined;
    out.speaker = r.speaker;
  }
  if (!absent(r.start)) {
    if (!time(r.start)) return undefined;
    out.start = r.start as number;
  }
  if (!absent(r.end)) {
    if (!time(r.end)) return undefined;
    out.end = r.end as number;
  }
  return out;
}

/** Reads one text frame of the server. */
export function parseCustomAnswer(text: string): CustomAnswer {
  let msg: unknown;
  try {
    msg = JSON.parse(text);
  } catch {
    return { kind: 'rejected', reason: 'malformed_json' };
  }
  if (Array.isArray(msg)) return { kind: 'rejected', reason: 'raw_array' };
  if (typeof msg !== 'object' || msg === null) return { kind: 'rejected', reason: 'not_an_object' };
  const m = msg as Record<string, unknown>;
  if (Object.hasOwn(m, 'type') && m.type !== CUSTOM_STT.resultsType) return { kind: 'ignored' };
  if (!Array.isArray(m.segments)) return { kind: 'rejected', reason: 'no_segments' };
  const segments: CustomSegment[] = [];
  let invalid = 0;
  for (const raw of m.segments as unknown[]) {
    const s = segment(raw);
    if (s) segments.push(s);
    else invalid++;
  }
  return { kind: 'results', segments, invalid };
}

/** Where a connection's audio stands, in seconds of the session's audio. */
export interface AnswerClock {
  /** Session time of the connection's first byte: server times count from there. */
  offsetS: number;
  /** End of the last segment emitted; a segment without `start` begins here. */
  cursorS: number;
  /** Audio written so far; a segment without `end` ends here. */
  audioS: number;
}

/** Session-timed segments (blank text skipped); moves `clock.cursorS` past them. */
export function timeSegments(segments: readonly CustomSegment[], clock: AnswerClock): RawSegment[] {
  const out: RawSegment[] = [];
  for (const s of segments) {
    if (s.text.trim() === '') continue;
    const start = s.start !== undefined ? clock.offsetS + s.start : Math.min(clock.cursorS, clock.audioS);
    const end = Math.max(start, s.end !== undefined ? clock.offsetS + s.end : clock.audioS);
    clock.cursorS = Math.max(clock.cursorS, end);
    out.push({ text: s.text, speaker: s.speaker ?? 'SPEAKER_00', start, end, sttProvider: CUSTOM_STT.provider });
  }
  return out;
}
