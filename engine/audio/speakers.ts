// Per-session speaker assignments from the client's `speaker_assigned` messages, applied to later segments (docs/protocol.md).
import type { TranscriptSegment } from './segment.js';

/** Why a `speaker_assigned` message was refused; the session ignores it and keeps its maps as they were. */
export const SPEAKER_ASSIGNED_ERROR = {
  /** Not a JSON object, or `type` is not `speaker_assigned`. */
  NOT_A_MESSAGE: 'ENG_ERR_WS_SPEAKER_ASSIGNED_NOT_A_MESSAGE',
  /** `speaker_id`, `person_id` or `person_name` is absent (all three are required). */
  FIELD_MISSING: 'ENG_ERR_WS_SPEAKER_ASSIGNED_FIELD_MISSING',
  /** A field has the wrong type or is out of range. */
  FIELD_INVALID: 'ENG_ERR_WS_SPEAKER_ASSIGNED_FIELD_INVALID',
} as const;
export type SpeakerAssignedErrorCode = (typeof SPEAKER_ASSIGNED_ERROR)[keyof typeof SPEAKER_ASSIGNED_ERROR];

export interface SpeakerAssignedError {
  code: SpeakerAssignedErrorCode;
  /** The offending field; names only, never values (they can be personal data). */
  field: string;
}

/** The `person_id` that means "the device owner" rather than a stored person. */
export const USER_PERSON_ID = 'user';

export interface SpeakerAssignment {
  /** null when the assignment is to the device owner. */
  personId: string | null;
  personName: string;
  isUser: boolean;
}

export interface SpeakerAssignedMessage {
  speakerId: number;
  personId: string;
  personName: string;
  segmentIds: string[];
}

export type AssignResult = { ok: true; message: SpeakerAssignedMessage } | { ok: false; error: SpeakerAssignedError };

export interface SpeakerAssignmentsOptions {
  /**
   * Most `segment_ids` one message may carry; a bigger list is refused so one message cannot grow the map unbounded.
   * @defaultValue 1000
   */
  maxSegmentIdsPerMessage?: number;
  /**
   * Most segment assignments kept per session; the oldest are forgotten first (old segments are long merged).
   * @defaultValue 10000
   */
  maxSegmentAssignments?: number;
}

function fail(code: SpeakerAssignedErrorCode, field: string): AssignResult {
  return { ok: false, error: { code, field } };
}

/** Validates a parsed `speaker_assigned` message without touching any state. */
export function parseSpeakerAssigned(raw: unknown, maxSegmentIds = 1000): AssignResult {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) return fail(SPEAKER_ASSIGNED_ERROR.NOT_A_MESSAGE, 'type');
  const m = raw as Record<string, unknown>;
  if (m['type'] !== 'speaker_assigned') return fail(SPEAKER_ASSIGNED_ERROR.NOT_A_MESSAGE, 'type');
  for (const field of ['speaker_id', 'person_id', 'person_name']) {
    if (m[field] === undefined || m[field] === null) return fail(SPEAKER_ASSIGNED_ERROR.FIELD_MISSING, field);
  }
  const speakerId = m['speaker_id'];
  if (typeof speakerId !== 'number' || !Number.isSafeInteger(speakerId) || speakerId < 0) {
    return fail(SPEAKER_ASSIGNED_ERROR.FIELD_INVALID, 'speaker_id');
  }
  const personId = m['person_id'];
  // An empty person_id names nobody: it is what an unconfirmed suggestion carries, not an assignment.
  if (typeof personId !== 'string' || personId === '') return fail(SPEAKER_ASSIGNED_ERROR.FIELD_INVALID, 'person_id');
  const personName = m['person_name'];
  if (typeof personName !== 'string') return fail(SPEAKER_ASSIGNED_ERROR.FIELD_INVALID, 'person_name');
  const rawIds = m['segment_ids'] ?? [];
  if (!Array.isArray(rawIds) || rawIds.length > maxSegmentIds || !rawIds.every((id): id is string => typeof id === 'string' && id !== '')) {
    return fail(SPEAKER_ASSIGNED_ERROR.FIELD_INVALID, 'segment_ids');
  }
  return { ok: true, message: { speakerId, personId, personName, segmentIds: [...rawIds] } };
}

/** What speaker identification found for a provider speaker (by voice or by a name the speaker gave). */
export interface SpeakerFinding {
  /** The voice was compared with the user's speech profile: the speaker's segments say speech_profile_processed. */
  profileCompared: boolean;
  /** The speaker was taken for the user or a person; absent: no match (yet). */
  match?: { isUser: boolean; personId: string | null } | undefined;
}

/**
 * One session's speaker → person and segment → person maps; later assignments overwrite earlier ones. Speaker
 * identification's findings sit below the client's own assignments: what the user picked always wins.
 */
export class SpeakerAssignments {
  readonly #bySpeaker = new Map<number, SpeakerAssignment>();
  readonly #found = new Map<number, SpeakerFinding>();
  readonly #bySegment = new Map<string, SpeakerAssignment>();
  readonly #maxSegmentIds: number;
  readonly #maxSegments: number;

  constructor(options: SpeakerAssignmentsOptions = {}) {
    this.#maxSegmentIds = options.maxSegmentIdsPerMessage ?? 1000;
    this.#maxSegments = options.maxSegmentAssignments ?? 10_000;
  }

  /** Validates `raw` and, when valid, records it; an invalid message changes nothing. */
  assign(raw: unknown): AssignResult {
    const result = parseSpeakerAssigned(raw, this.#maxSegmentIds);
    if (!result.ok) return result;
    const { speakerId, personId, personName, segmentIds } = result.message;
    const isUser = personId === USER_PERSON_ID;
    const assignment: SpeakerAssignment = Object.freeze({ personId: isUser ? null : personId, personName, isUser });
    this.#bySpeaker.set(speakerId, assignment);
    for (const id of segmentIds) {
      // Re-inserting moves the id to the back, so eviction below drops the least recently assigned.
      this.#bySegment.delete(id);
      this.#bySegment.set(id, assignment);
    }
    for (const id of this.#bySegment.keys()) {
      if (this.#bySegment.size <= this.#maxSegments) break;
      this.#bySegment.delete(id);
    }
    return result;
  }

  forSpeaker(speakerId: number): SpeakerAssignment | undefined {
    return this.#bySpeaker.get(speakerId);
  }

  forSegment(segmentId: string): SpeakerAssignment | undefined {
    return this.#bySegment.get(segmentId);
  }

  /** Records what speaker identification found for `speakerId` (replacing an earlier finding). */
  found(speakerId: number, finding: SpeakerFinding): void {
    this.#found.set(speakerId, Object.freeze({ ...finding }));
  }

  findingFor(speakerId: number): SpeakerFinding | undefined {
    return this.#found.get(speakerId);
  }

  /**
   * The segment with `isUser`/`personId` taken from the maps: an assignment naming the segment itself wins over
   * one for its speaker, because the client picked that exact segment, and both win over identification's finding.
   * Unassigned segments come back unchanged. Never mutates `segment`.
   */
  apply(segment: TranscriptSegment): TranscriptSegment {
    const a = this.#bySegment.get(segment.id) ?? this.#bySpeaker.get(segment.speakerId);
    const f = this.#found.size > 0 ? this.#found.get(segment.speakerId) : undefined;
    if (a === undefined && f === undefined) return { ...segment };
    const out = { ...segment };
    if (f !== undefined) {
      if (f.profileCompared) out.speechProfileProcessed = true;
      if (f.match) [out.isUser, out.personId] = [f.match.isUser, f.match.personId];
    }
    if (a !== undefined) [out.isUser, out.personId] = [a.isUser, a.personId];
    return out;
  }
}
