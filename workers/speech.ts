// Speech thread of the local engine: each session's pocketsphinx recognizer, behind its Silero speech gate when the
// session is gated, so the session's audio crosses to this thread once and only its words go back.
import { SileroVad } from '../native/silero-vad.js';
import { GatedRecognizer } from './speech-gate.js';
import { PsRecognizer } from './speech-recognizer.js';
import type { FailAnswer, GateSpec, LocalSegment, SpeechAnswer, SpeechAnswerOk, SpeechTask } from './speech-messages.js';

interface Session {
  recognizer: PsRecognizer;
  gate: GatedRecognizer | null;
}

const sessions = new Map<string, Session>();
/** Silero models by file, loaded by the first batch with a whole window; every gated session of the thread shares one. */
const models = new Map<string, Promise<SileroVad>>();

function vadModel(modelPath: string): Promise<SileroVad> {
  let model = models.get(modelPath);
  if (model === undefined) {
    const loading = SileroVad.load(modelPath);
    models.set(modelPath, loading);
    // A failed load is retried by the next batch rather than kept.
    loading.catch(() => models.get(modelPath) === loading && models.delete(modelPath));
    model = loading;
  }
  return model;
}

function gateFor(recognizer: PsRecognizer, spec: GateSpec): GatedRecognizer {
  return new GatedRecognizer(recognizer, async (pcm, h, c) => (await vadModel(spec.modelPath)).run(pcm, h, c), spec);
}

function fail(message: string): FailAnswer {
  return { ok: false, code: 'ENG_ERR_STT_LOCAL_FAILED', message };
}

function answer(s: Session, segments: LocalSegment[]): SpeechAnswerOk {
  return s.gate === null ? { ok: true, segments } : { ok: true, segments, gate: { ...s.gate.stats } };
}

function closeSession(sessionId: string): void {
  sessions.get(sessionId)?.recognizer.free();
  sessions.delete(sessionId);
}

export default async function handle(task: SpeechTask): Promise<SpeechAnswer> {
  try {
    switch (task.type) {
      case 'open': {
        closeSession(task.sessionId);
        const recognizer = new PsRecognizer(task.modelDir, task.maxUtteranceSamples);
        sessions.set(task.sessionId, { recognizer, gate: task.gate === null ? null : gateFor(recognizer, task.gate) });
        return { ok: true, segments: [] };
      }
      case 'audio': {
        const s = sessions.get(task.sessionId);
        // A thread that replaced a crashed one has no recognizer for the session: the engine reports the loss.
        if (s === undefined) return fail('unknown session (thread restarted)');
        const out: LocalSegment[] = [];
        if (s.gate === null) s.recognizer.write(task.pcm, out);
        else await s.gate.write(task.pcm, out);
        return answer(s, out);
      }
      case 'flush': {
        const s = sessions.get(task.sessionId);
        if (s === undefined) return fail('unknown session (thread restarted)');
        const out: LocalSegment[] = [];
        if (s.gate === null) s.recognizer.finalize(out);
        else s.gate.finalize(out);
        return answer(s, out);
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
