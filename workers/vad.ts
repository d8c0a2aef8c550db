// Speech-gate thread: runs Silero VAD over 512-sample windows; stateless, the recurrent state travels with each task.
import { SileroVad, VAD_WINDOW_SAMPLES } from '../native/silero-vad.js';
import type { VadAnswer, VadTask } from './stt-messages.js';

const models = new Map<string, Promise<SileroVad>>();

export default async function handle(task: VadTask): Promise<VadAnswer> {
  // Nothing to run (VadPool.close()'s ping): answered without loading the model.
  if (task.pcm.length < VAD_WINDOW_SAMPLES) return { ok: true, probs: new Float32Array(0), h: task.h, c: task.c };
  try {
    let model = models.get(task.modelPath);
    if (model === undefined) {
      model = SileroVad.load(task.modelPath);
      models.set(task.modelPath, model);
      // A failed load is retried by the next task rather than cached.
      model.catch(() => models.delete(task.modelPath));
    }
    const probs = await (await model).run(task.pcm, task.h, task.c);
    return { ok: true, probs, h: task.h, c: task.c };
  } catch (err) {
    return { ok: false, code: 'ENG_ERR_STT_VAD_FAILED', message: err instanceof Error ? err.message : String(err) };
  }
}
