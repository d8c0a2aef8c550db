// Parses the listen session's client text frames (docs/protocol.md, Client → server) into a discriminated union; pure.
import { ListenMessage } from '../protocol.js';
import type { RawSegment } from '../audio/buffer-loop.js';

export type ClientMessage =
  | { kind: 'malformed' }
  | { kind: 'suggested_transcript'; segments: RawSegment[] }
  | { kind: 'speaker_assigned'; raw: Record<string, unknown> }
  | { kind: 'image_chunk'; raw: Record<string, unknown> }
  | { kind: 'other' };

const num = (x: unknown, fallback: number): number => (typeof x === 'number' && Number.isFinite(x) ? x : fallback);

export function parseClientMessage(text: string): ClientMessage {
  let msg: unknown;
  try {
    msg = JSON.parse(text);
  } catch {
    return { kind: 'malformed' };
  }
  if (typeof msg !== 'object' || msg === null || Array.isArray(msg)) return { kind: 'malformed' };
  const m = msg as Record<string, unknown>;
  switch (m.type) {
    case ListenMessage.SUGGESTED_TRANSCRIPT: {
      if (!Array.isArray(m.segments)) return { kind: 'malformed' };
      const provider = typeof m.stt_provider === 'string' ? m.stt_provider.slice(0, 64) : null;
      const segments: RawSegment[] = [];
      for (const s of m.segments as unknown[]) {
        if (typeof s !== 'object' || s === null) continue;
        const r = s as Record<string, unknown>;
        if (typeof r.text !== 'string') continue;
        const start = num(r.start, 0);
        segments.push({
          text: r.text,
          speaker: typeof r.speaker === 'string' ? r.speaker : typeof r.speaker_id === 'number' ? `SPEAKER_${String(r.speaker_id).padStart(2, '0')}` : 'SPEAKER_00',
          start,
          end: Math.max(start, num(r.end, start)),
          isUser: r.is_user === true,
          personId: typeof r.person_id === 'string' ? r.person_id : null,
          sttProvider: provider,
        });
      }
      return { kind: 'suggested_transcript', segments };
    }
    case ListenMessage.SPEAKER_ASSIGNED:
      return { kind: 'speaker_assigned', raw: m };
    case ListenMessage.IMAGE_CHUNK:
      return { kind: 'image_chunk', raw: m };
    default:
      return { kind: 'other' };
  }
}
