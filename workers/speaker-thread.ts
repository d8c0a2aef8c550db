// Entry of the speaker-embedding thread (engine/speakers/embedding-service.ts starts it through the thread runner):
// 16 kHz mono PCM in, a unit-length embedding out, from the built-in DSP embedder or from an ONNX model.
import { SpeakerModel } from '../native/speaker-model.js';
import { SileroVad, VAD_STATE_FLOATS, VAD_WINDOW_SAMPLES } from '../native/silero-vad.js';
import { moveAnswer } from './messages.js';
import { concatPcm } from './packing.js';
import { SpeechGate, type GateAction } from './speech-gate.js';
import { DspSpeakerEmbedder, normalise } from './speaker-embedding.js';
import { FBANK_BANDS, FeatureExtractor, SAMPLE_RATE, fbank } from './speaker-features.js';

/** An ONNX model by path, with the SHA-256 its name was made from. */
export interface ModelSpec {
  path: string;
  sha256: string;
}

/** Loads the model (a no-op for the built-in one) and answers its width. */
export interface LoadTask {
  type: 'load';
  model: ModelSpec | null;
}

/** One embedding of `pcm` (moved here). */
export interface EmbedTask {
  type: 'embed';
  model: ModelSpec | null;
  pcm: Int16Array;
}

/** The speech of `pcm` (moved here), its silence cut out by the Silero speech gate. */
export interface SpeechTask {
  type: 'speech';
  pcm: Int16Array;
}

export type SpeakerTask = LoadTask | EmbedTask | SpeechTask;

export type SpeakerAnswer =
  | { ok: true; dimension: number }
  | { ok: true; embedding: Float32Array }
  | { ok: true; speech: Int16Array }
  | { ok: false; message: string };

/**
 * The gate that trims a profile upload: the live gate's threshold, with less audio kept around each region (about
 * 100 ms before, 250 ms after) since what is kept is counted as speech.
 */
const TRIM_GATE = { threshold: 0.5, preRollMs: 96, hangoverMs: 256 } as const;

/** Fewer fbank frames than this (0.1 s) carry no voice: the embedding is all zeros, as the built-in gives silence. */
export const MIN_MODEL_FRAMES = 10;

const dsp = new DspSpeakerEmbedder();
let extractor: FeatureExtractor | undefined;
/** Models by path; a failed load is forgotten so the next task tries again. */
const models = new Map<string, Promise<SpeakerModel>>();

function modelFor(spec: ModelSpec): Promise<SpeakerModel> {
  let model = models.get(spec.path);
  if (model === undefined) {
    const loading = SpeakerModel.load(spec.path, spec.sha256);
    models.set(spec.path, loading);
    loading.catch(() => models.get(spec.path) === loading && models.delete(spec.path));
    model = loading;
  }
  return model;
}

async function embedWithModel(spec: ModelSpec, pcm: Int16Array): Promise<Float32Array> {
  const model = await modelFor(spec);
  extractor ??= new FeatureExtractor(FBANK_BANDS, SAMPLE_RATE / 2);
  const { frames, values } = fbank(extractor, pcm);
  if (frames < MIN_MODEL_FRAMES) return new Float32Array(model.dimension);
  return normalise(await model.run(values, frames));
}

let vad: Promise<SileroVad> | undefined;

async function speechOf(pcm: Int16Array): Promise<Int16Array> {
  const loading = (vad ??= SileroVad.load());
  loading.catch(() => vad === loading && (vad = undefined));
  const model = await loading;
  const whole = pcm.length - (pcm.length % VAD_WINDOW_SAMPLES);
  const probabilities = await model.run(pcm.subarray(0, whole), new Float32Array(VAD_STATE_FLOATS), new Float32Array(VAD_STATE_FLOATS));
  const gate = new SpeechGate(TRIM_GATE);
  const actions: GateAction[] = [];
  for (let w = 0; w < probabilities.length; w++) {
    const at = w * VAD_WINDOW_SAMPLES;
    gate.window(pcm.subarray(at, at + VAD_WINDOW_SAMPLES), at, probabilities[w]!, actions);
  }
  return concatPcm(actions.flatMap((a) => (a.kind === 'pass' ? [a.pcm] : [])));
}

export default async function handle(task: SpeakerTask): Promise<SpeakerAnswer> {
  try {
    if (task.type === 'load') return { ok: true, dimension: task.model === null ? dsp.dimension : (await modelFor(task.model)).dimension };
    if (task.type === 'speech') {
      const speech = await speechOf(task.pcm);
      return moveAnswer({ ok: true, speech }, [speech.buffer as ArrayBuffer]);
    }
    const embedding = task.model === null ? dsp.embed(task.pcm) : await embedWithModel(task.model, task.pcm);
    return moveAnswer({ ok: true, embedding }, [embedding.buffer as ArrayBuffer]);
  } catch (err) {
    return { ok: false, message: err instanceof Error ? err.message : String(err) };
  }
}
