// The speaker-embedding service of a node: the built-in DSP embedding, or an ONNX model named by SPEAKER_MODEL_PATH,
// run on a thread of its own (workers/speaker-thread.ts) so that a few seconds of audio never hold the main thread.
//
// Rationale: a thread is started by the first embedding, not with the node, so a node where nobody has a profile or
// people pays nothing; a model file is hashed here, once, because its name (file name and hash) is stored with every
// embedding and tells the store which ones a changed model must recompute.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { basename } from 'node:path';
import { InlineRunner, TaskThread, type TaskRunner } from '../runtime/task-thread.js';
import { DSP_DIMENSION, DSP_MODEL_NAME } from '../../workers/speaker-embedding.js';
import type { ModelSpec, SpeakerAnswer, SpeakerTask } from '../../workers/speaker-thread.js';

/** 16 kHz mono PCM in, a unit vector out; vectors of one voice lie close together by cosine similarity. */
export interface EmbeddingService {
  /** Stored with every embedding: `dsp-mfcc-stats` for the built-in one, `<file name>@<first 12 hex of SHA-256>` for a model file. */
  readonly model: string;
  /** Width of the vectors; a model file's is known once it has loaded (`load()`), 0 before. */
  readonly dimension: number;
  embed(pcm: Int16Array): Promise<Float32Array>;
  close(): Promise<void>;
}

/** Cuts the silence out of a recording (the Silero speech gate), off the main thread. */
export interface SilenceTrimmer {
  /** The speech of 16 kHz mono `pcm`, its regions joined; empty when there is none. */
  trimSilence(pcm: Int16Array): Promise<Int16Array>;
}

export interface EmbeddingServiceOptions {
  /** An ONNX speaker model (input [1, frames, 80] fbank, output [1, D]); absent: the built-in DSP embedding. */
  modelPath?: string;
  /** Threads embeddings run on, each started by the first task it gets. @defaultValue 1 */
  threads?: number;
  /** Thread module; tests may point it elsewhere. @defaultValue dist/workers/speaker-thread.js */
  filename?: string;
}

/** What load() learnt: the model's name, width and, for a model file, its SHA-256. */
export interface LoadedModel {
  model: string;
  dimension: number;
  sha256: string | null;
}

const HANDLER = new URL('../../workers/speaker-thread.js', import.meta.url).href;
/** Hex digits of the SHA-256 in a model file's name: enough to tell versions of a file apart. */
const NAME_HASH_CHARS = 12;

/** A model file's path, SHA-256 and stored name; throws when the file cannot be read. */
export function describeModel(modelPath: string): ModelSpec & { model: string } {
  const sha256 = createHash('sha256').update(readFileSync(modelPath)).digest('hex');
  return { path: modelPath, sha256, model: `${basename(modelPath)}@${sha256.slice(0, NAME_HASH_CHARS)}` };
}

/** Embeddings on runners made by `runner`: TaskThreads for a node, the calling thread for tests. */
class RunnerEmbeddingService implements EmbeddingService, SilenceTrimmer {
  readonly model: string;
  readonly sha256: string | null;
  #dimension: number;
  readonly #spec: ModelSpec | null;
  readonly #make: () => TaskRunner<SpeakerTask, SpeakerAnswer>;
  readonly #runners: (TaskRunner<SpeakerTask, SpeakerAnswer> | undefined)[];
  readonly #inFlight: number[];
  #closed = false;

  constructor(options: EmbeddingServiceOptions, make: (filename: string) => TaskRunner<SpeakerTask, SpeakerAnswer>) {
    const threads = Math.max(1, Math.trunc(options.threads ?? 1));
    const filename = options.filename ?? HANDLER;
    this.#make = () => make(filename);
    this.#runners = new Array<undefined>(threads).fill(undefined);
    this.#inFlight = new Array<number>(threads).fill(0);
    if (options.modelPath === undefined) {
      this.#spec = null;
      this.sha256 = null;
      this.model = DSP_MODEL_NAME;
      this.#dimension = DSP_DIMENSION;
    } else {
      const { model, ...spec } = describeModel(options.modelPath);
      this.#spec = spec;
      this.sha256 = spec.sha256;
      this.model = model;
      this.#dimension = 0;
    }
  }

  get dimension(): number {
    return this.#dimension;
  }

  /** Loads the model on a thread and checks its shapes (start-up does this for a model file): throws why it cannot be used. */
  async load(): Promise<LoadedModel> {
    const answer = await this.#run({ type: 'load', model: this.#spec });
    if (!answer.ok) throw new Error(answer.message);
    if (!('dimension' in answer)) throw new Error('speaker thread answered a load with an embedding');
    this.#dimension = answer.dimension;
    return { model: this.model, dimension: answer.dimension, sha256: this.sha256 };
  }

  /** The audio is copied to the thread; the caller's array stays usable. */
  async embed(pcm: Int16Array): Promise<Float32Array> {
    const copy = pcm.slice();
    const answer = await this.#run({ type: 'embed', model: this.#spec, pcm: copy }, [copy.buffer]);
    if (!answer.ok) throw new Error(answer.message);
    if (!('embedding' in answer)) throw new Error('speaker thread answered an embedding with a load');
    this.#dimension = answer.embedding.length;
    return answer.embedding;
  }

  /** Runs on the embedding thread, which profile uploads need next anyway. */
  async trimSilence(pcm: Int16Array): Promise<Int16Array> {
    const copy = pcm.slice();
    const answer = await this.#run({ type: 'speech', pcm: copy }, [copy.buffer]);
    if (!answer.ok) throw new Error(answer.message);
    if (!('speech' in answer)) throw new Error('speaker thread answered a trim with something else');
    return answer.speech;
  }

  async close(): Promise<void> {
    this.#closed = true;
    const runners = this.#runners.splice(0);
    await Promise.all(runners.map((r) => r?.destroy()));
  }

  /** Runs on the runner with the fewest tasks in flight, starting it if it is not yet running. */
  async #run(task: SpeakerTask, transfer: ArrayBuffer[] = []): Promise<SpeakerAnswer> {
    if (this.#closed) throw new Error('speaker embeddings closed');
    let index = 0;
    for (let i = 1; i < this.#inFlight.length; i++) if (this.#inFlight[i]! < this.#inFlight[index]!) index = i;
    const runner = (this.#runners[index] ??= this.#make());
    this.#inFlight[index]!++;
    try {
      return await runner.run(task, transfer);
    } finally {
      this.#inFlight[index]!--;
    }
  }
}

export type ThreadEmbeddingService = EmbeddingService & SilenceTrimmer & { readonly sha256: string | null; load(): Promise<LoadedModel> };

/** Embeddings on worker threads, started by the first task. Throws when `modelPath` cannot be read. */
export function createEmbeddingService(options: EmbeddingServiceOptions = {}): ThreadEmbeddingService {
  return new RunnerEmbeddingService(options, (filename) => new TaskThread<SpeakerTask, SpeakerAnswer>(filename));
}

/** The same service answered on the calling thread: for tests that want no thread. */
export function createInlineEmbeddingService(options: EmbeddingServiceOptions = {}): ThreadEmbeddingService {
  return new RunnerEmbeddingService(options, (filename) => new InlineRunner<SpeakerTask, SpeakerAnswer>(filename));
}
