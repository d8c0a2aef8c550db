// Local speech thread: keeps `sessionId → pocketsphinx decoder` in this thread and answers open / audio / flush / close.
import { createPsDecoder, PS_FRAME_SAMPLES, type PsDecoder } from '../native/pocketsphinx.js';
import type { FailAnswer, LocalAnswer, LocalSegment, LocalTask } from './stt-messages.js';

const SAMPLE_RATE_HZ = 16000;

interface Session {
  decoder: PsDecoder;
  maxUtteranceSamples: number;
  /** Samples fed since the stream started. */
  fedSamples: number;
  /** Stream sample at which the open utterance began; -1 when none is open. */
  uttStartSample: number;
}

const sessions = new Map<string, Session>();

function fail(message: string): FailAnswer {
  return { ok: false, code: 'ENG_ERR_STT_LOCAL_FAILED', message };
}

/** Ends the open utterance and converts its frames to stream seconds; undefined when it held no words. */
function endUtterance(s: Session): LocalSegment | undefined {
  const startSample = s.uttStartSample;
  s.uttStartSample = -1;
  const utt = s.decoder.endUtterance();
  if (utt === null || utt.words.length === 0) return undefined;
  const toSeconds = (frame: number): number => Math.round(((startSample + frame * PS_FRAME_SAMPLES) / SAMPLE_RATE_HZ) * 1000) / 1000;
  // The last frame ends 10 ms after it starts; no word may end past the audio actually fed.
  const limit = s.fedSamples / SAMPLE_RATE_HZ;
  const words = utt.words.map(([word, sf, ef]) => ({ word, start: Math.min(toSeconds(sf), limit), end: Math.min(toSeconds(ef + 1), limit) }));
  return { text: words.map((w) => w.word).join(' '), start: words[0]!.start, end: words[words.length - 1]!.end, words };
}

function audio(s: Session, chunks: Int16Array[]): LocalSegment[] {
  const out: LocalSegment[] = [];
  for (const chunk of chunks) {
    let at = 0;
    while (at < chunk.length) {
      if (s.uttStartSample < 0) s.uttStartSample = s.fedSamples;
      // Cut at the utterance limit: pocketsphinx only settles its words when the utterance ends.
      const room = s.maxUtteranceSamples - (s.fedSamples - s.uttStartSample);
      const n = Math.min(room, chunk.length - at);
      s.decoder.process(chunk.subarray(at, at + n));
      s.fedSamples += n;
      at += n;
      if (s.fedSamples - s.uttStartSample >= s.maxUtteranceSamples) {
        const seg = endUtterance(s);
        if (seg !== undefined) out.push(seg);
      }
    }
  }
  return out;
}

function closeSession(sessionId: string): void {
  sessions.get(sessionId)?.decoder.free();
  sessions.delete(sessionId);
}

export default function handle(task: LocalTask): LocalAnswer {
  try {
    switch (task.type) {
      case 'open': {
        closeSession(task.sessionId);
        const decoder = createPsDecoder(task.modelDir);
        sessions.set(task.sessionId, { decoder, maxUtteranceSamples: task.maxUtteranceSamples, fedSamples: 0, uttStartSample: -1 });
        return { ok: true, segments: [] };
      }
      case 'audio': {
        const s = sessions.get(task.sessionId);
        // A thread that replaced a crashed one has no decoder for the session: the engine reports the loss.
        if (s === undefined) return fail('unknown session (thread restarted)');
        return { ok: true, segments: audio(s, task.pcm) };
      }
      case 'flush': {
        const s = sessions.get(task.sessionId);
        if (s === undefined) return fail('unknown session (thread restarted)');
        const seg = s.uttStartSample >= 0 ? endUtterance(s) : undefined;
        return { ok: true, segments: seg === undefined ? [] : [seg] };
      }
      case 'close':
        closeSession(task.sessionId);
        return { ok: true, segments: [] };
    }
  } catch (err) {
    // A decoder that threw is not trusted further.
    if (task.type !== 'close') closeSession(task.sessionId);
    return fail(err instanceof Error ? err.message : String(err));
  }
}
