// An ONNX speaker-embedding model (WeSpeaker ResNet34, ECAPA and the like) on onnxruntime-node: an 80-band fbank
// in, one embedding out. Loaded from the bytes whose SHA-256 names the model, so the name stored with embeddings
// always describes the file that computed them.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';

type Ort = typeof import('onnxruntime-node');
type InferenceSession = import('onnxruntime-node').InferenceSession;

/** Bands per frame the model must take: input [1, frames, FBANK_INPUT_BANDS]. */
export const FBANK_INPUT_BANDS = 80;
/** Frames of the probe run at load (2 s at a 10 ms shift): it tells the output's width and proves the shapes. */
const PROBE_FRAMES = 200;

/** Why a model cannot be used: its file, its shapes, or what it answered to a probe. */
export class SpeakerModelError extends Error {
  override readonly name = 'SpeakerModelError';
}

/** Hex SHA-256 of a model file's bytes. */
export function sha256Hex(bytes: Uint8Array): string {
  return createHash('sha256').update(bytes).digest('hex');
}

function shapeText(shape: readonly (number | string)[]): string {
  return `[${shape.join(', ')}]`;
}

export class SpeakerModel {
  readonly #ort: Ort;
  readonly #session: InferenceSession;
  readonly #input: string;
  readonly #output: string;
  /** Width of the embedding, learnt from the probe run. */
  readonly dimension: number;
  readonly sha256: string;

  private constructor(ort: Ort, session: InferenceSession, sha256: string, dimension: number) {
    this.#ort = ort;
    this.#session = session;
    this.#input = session.inputNames[0]!;
    this.#output = session.outputNames[0]!;
    this.sha256 = sha256;
    this.dimension = dimension;
  }

  /**
   * Loads the model at `path`; with `expectSha256`, refuses a file whose bytes changed since they were hashed.
   * Throws SpeakerModelError unless the model takes one float tensor [1, frames, 80] and answers [1, D].
   */
  static async load(path: string, expectSha256?: string): Promise<SpeakerModel> {
    let bytes: Buffer;
    try {
      bytes = readFileSync(path);
    } catch (err) {
      throw new SpeakerModelError(`speaker model ${path} cannot be read (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
    }
    const sha256 = sha256Hex(bytes);
    if (expectSha256 !== undefined && sha256 !== expectSha256) throw new SpeakerModelError(`speaker model ${path} changed after start-up (SHA-256 ${sha256})`);
    // Imported by the first model, so a node with no model file never loads onnxruntime for speakers.
    const ort = (await import('onnxruntime-node')).default;
    let session: InferenceSession;
    try {
      // One thread: the embedding thread is the parallelism, and the cores are shared with the codecs.
      session = await ort.InferenceSession.create(bytes, { intraOpNumThreads: 1, interOpNumThreads: 1, executionMode: 'sequential' });
    } catch (err) {
      throw new SpeakerModelError(`speaker model ${path} is not a loadable ONNX model: ${(err as Error).message}`);
    }
    const inputs = session.inputMetadata;
    if (inputs.length !== 1) throw new SpeakerModelError(`speaker model ${path} must take one input, takes ${inputs.length}`);
    const input = inputs[0]!;
    if (input.isTensor) {
      const { shape, type } = input;
      const bands = shape[2];
      if (type !== 'float32' || shape.length !== 3 || (typeof bands === 'number' && bands !== FBANK_INPUT_BANDS)) {
        throw new SpeakerModelError(`speaker model ${path} must take float32 [1, frames, ${FBANK_INPUT_BANDS}], takes ${type} ${shapeText(shape)}`);
      }
    }
    const model = new SpeakerModel(ort, session, sha256, 0);
    let probe: Float32Array;
    try {
      // Any fbank-shaped input proves the shapes; a fixed ramp keeps the load deterministic.
      const features = Float32Array.from({ length: PROBE_FRAMES * FBANK_INPUT_BANDS }, (_, i) => ((i % 97) - 48) / 48);
      probe = await model.run(features, PROBE_FRAMES);
    } catch (err) {
      throw new SpeakerModelError(`speaker model ${path} failed on a [1, ${PROBE_FRAMES}, ${FBANK_INPUT_BANDS}] fbank input: ${(err as Error).message}`);
    }
    return new SpeakerModel(ort, session, sha256, probe.length);
  }

  /** The embedding of `frames` fbank rows (row-major, 80 floats each), as the model answered it (not normalised). */
  async run(features: Float32Array, frames: number): Promise<Float32Array> {
    const out = await this.#session.run({ [this.#input]: new this.#ort.Tensor('float32', features, [1, frames, FBANK_INPUT_BANDS]) });
    const value = out[this.#output]!;
    const dims = value.dims;
    if (dims.length !== 2 || dims[0] !== 1 || !(dims[1]! > 0) || value.type !== 'float32') {
      throw new SpeakerModelError(`output must be float32 [1, D], got ${value.type} ${shapeText(dims)}`);
    }
    if (this.dimension !== 0 && dims[1] !== this.dimension) throw new SpeakerModelError(`output width changed from ${this.dimension} to ${dims[1]}`);
    return Float32Array.from(value.data as Float32Array);
  }
}
