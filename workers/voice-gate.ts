// The voice-message speech check, on its own thread: Silero VAD over an upload's 16 kHz PCM until enough of it is
// speech. Answers whether it is; a failure is an answer too, so the caller never mistakes it for silence.
import { SileroVad, VAD_STATE_FLOATS, VAD_WINDOW_SAMPLES } from '../native/silero-vad.js';

export interface SpeechCheckTask {
  /** 16 kHz mono PCM (copied to the thread: the caller still sends it to a provider). */
  pcm: Int16Array;
  modelPath: string;
  /** Probability from which a window is speech. */
  threshold: number;
  /** Speech windows that make the audio speech; the check stops at the last of them. */
  minSpeechWindows: number;
}

export type SpeechCheckAnswer =
  | { ok: true; speech: boolean; windowsRead: number; speechWindows: number }
  | { ok: false; message: string };

/** Windows per model call: the check stops within a second of audio of having enough. */
const WINDOWS_PER_CALL = 32;

/** Loaded models by file; a failed load is tried again by the next task. */
const models = new Map<string, Promise<SileroVad>>();

function model(path: string): Promise<SileroVad> {
  let m = models.get(path);
  if (m === undefined) {
    m = SileroVad.load(path);
    models.set(path, m);
    const loading = m;
    loading.catch(() => models.get(path) === loading && models.delete(path));
  }
  return m;
}

export default async function check(task: SpeechCheckTask): Promise<SpeechCheckAnswer> {
  try {
    const vad = await model(task.modelPath);
    const h = new Float32Array(VAD_STATE_FLOATS);
    const c = new Float32Array(VAD_STATE_FLOATS);
    const step = WINDOWS_PER_CALL * VAD_WINDOW_SAMPLES;
    let windowsRead = 0;
    let speechWindows = 0;
    for (let at = 0; at + VAD_WINDOW_SAMPLES <= task.pcm.length; at += step) {
      const probs = await vad.run(task.pcm.subarray(at, Math.min(task.pcm.length, at + step)), h, c);
      windowsRead += probs.length;
      for (const p of probs) if (p >= task.threshold) speechWindows++;
      if (speechWindows >= task.minSpeechWindows) return { ok: true, speech: true, windowsRead, speechWindows };
    }
    return { ok: true, speech: false, windowsRead, speechWindows };
  } catch (err) {
    return { ok: false, message: err instanceof Error ? err.name : 'error' };
  }
}
