// The real-time transcript segment of the listen socket's wire model, as the engine holds it.

export interface TranscriptSegment {
  /** UUID; a merged tail keeps the stored segment's id. */
  id: string;
  text: string;
  /** SPEAKER_nn */
  speaker: string;
  /** Parsed from the label's suffix; 0 when it has none. */
  speakerId: number;
  isUser: boolean;
  personId: string | null;
  /** Seconds from conversation start. */
  start: number;
  end: number;
  speechProfileProcessed: boolean;
  sttProvider: string | null;
}

/** The wire shape sent to clients in the bare JSON array. */
export function toWire(s: TranscriptSegment): Record<string, unknown> {
  return {
    id: s.id,
    text: s.text,
    speaker: s.speaker,
    speaker_id: s.speakerId,
    is_user: s.isUser,
    person_id: s.personId,
    start: s.start,
    end: s.end,
    speech_profile_processed: s.speechProfileProcessed,
    stt_provider: s.sttProvider,
  };
}

/** SPEAKER_03 → 3; anything unparsable → 0 (as the compatible system does). */
export function speakerIdOf(label: string): number {
  const m = /(\d+)$/.exec(label);
  return m ? Number(m[1]) : 0;
}
