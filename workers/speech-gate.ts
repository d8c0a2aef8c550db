// The speech gate, on the speech thread: Silero VAD decides per 512-sample window what of a session's audio reaches its
// recogniser, and the recogniser's times, counted over the audio it got, are mapped back to the stream's.
//
// Rationale: pocketsphinx decodes silence and invents words in it, and settles its words only when an utterance ends,
// so only speech (plus pre-roll) goes in and each speech region ends the utterance at a real pause. The gate runs
// beside the recogniser so that a session's audio crosses threads once (docs/patterns/local-stt.md).
import { VAD_STATE_FLOATS, VAD_WINDOW_SAMPLES } from '../native/silero-vad.js';
import type { GateSettings, GateStats, LocalSegment } from './speech-messages.js';
import { concatPcm } from './packing.js';
import type { Recognizer } from './speech-recognizer.js';

const SAMPLE_RATE_HZ = 16000;
const WINDOW_MS = (VAD_WINDOW_SAMPLES * 1000) / SAMPLE_RATE_HZ;
const EMPTY = new Int16Array(0);

/** What the gate decided for one window. */
export type GateAction = { kind: 'pass'; pcm: Int16Array; streamSample: number } | { kind: 'end' };

/** The gate's decision logic alone: feed windows and their probabilities, get what to pass on. */
export class SpeechGate {
  readonly #threshold: number;
  readonly #negative: number;
  readonly #preRollWindows: number;
  readonly #hangoverWindows: number;
  #preRoll: { pcm: Int16Array; streamSample: number }[] = [];
  #speaking = false;
  #quietWindows = 0;

  constructor(options: GateSettings = {}) {
    this.#threshold = options.threshold ?? 0.5;
    this.#negative = options.negativeThreshold ?? Math.max(0.01, this.#threshold - 0.15);
    this.#preRollWindows = Math.round((options.preRollMs ?? 300) / WINDOW_MS);
    this.#hangoverWindows = Math.max(1, Math.round((options.hangoverMs ?? 700) / WINDOW_MS));
  }

  get speaking(): boolean {
    return this.#speaking;
  }

  /** Ends the speech region, if any, without a hang-over (the audio stopped); answers whether one was going on. */
  end(): boolean {
    const was = this.#speaking;
    this.#speaking = false;
    this.#quietWindows = 0;
    // Windows from before a gap in the audio are not what precedes the next speech.
    this.#preRoll = [];
    return was;
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

/** Maps times of the gated audio (what the recogniser got) back to the original stream. */
export class TimeMap {
  /** Contiguous runs: gated sample where the run starts → original stream sample where it starts. */
  readonly #runs: { inner: number; stream: number }[] = [];
  #innerSamples = 0;
  #nextStreamSample = -1;

  /** Records `samples` passed on from original position `streamSample`. */
  passed(streamSample: number, samples: number): void {
    if (streamSample !== this.#nextStreamSample) this.#runs.push({ inner: this.#innerSamples, stream: streamSample });
    this.#innerSamples += samples;
    this.#nextStreamSample = streamSample + samples;
  }

  /** Seconds in the gated audio → seconds in the original stream. */
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

/** Speech probability of each whole window of `pcm`, carrying the model's state (h, c) from call to call. */
export type VadRun = (pcm: Int16Array, h: Float32Array, c: Float32Array) => Promise<Float32Array>;

/** A recognizer behind the gate: write() takes the session's audio as it comes, `inner` gets only the speech. */
export class GatedRecognizer {
  readonly stats: GateStats = { inSamples: 0, passedSamples: 0, regions: 0, vadFailures: 0 };
  readonly #inner: Recognizer;
  readonly #vad: VadRun;
  readonly #gate: SpeechGate;
  readonly #map = new TimeMap();
  readonly #h = new Float32Array(VAD_STATE_FLOATS);
  readonly #c = new Float32Array(VAD_STATE_FLOATS);
  /** Audio short of a whole window, held for the next batch. */
  #rest: Int16Array = EMPTY;
  /** Original-stream sample of the first sample of #rest. */
  #restAt = 0;
  /** Passed audio not yet fed, so that one speech region's audio reaches the recognizer in one call per batch. */
  #passing: Int16Array[] = [];

  constructor(inner: Recognizer, vad: VadRun, options: GateSettings = {}) {
    this.#inner = inner;
    this.#vad = vad;
    this.#gate = new SpeechGate(options);
  }

  /** Gates every whole window of the held rest and `pcm`; utterances that ended are added to `out`, in stream times. */
  async write(pcm: Int16Array, out: LocalSegment[]): Promise<void> {
    this.stats.inSamples += pcm.length;
    const all = this.#rest.length === 0 ? pcm : concatPcm([this.#rest, pcm]);
    const start = this.#restAt;
    const whole = all.length - (all.length % VAD_WINDOW_SAMPLES);
    this.#rest = all.subarray(whole);
    this.#restAt = start + whole;
    if (whole === 0) return;
    const windows = all.subarray(0, whole);
    let probs: Float32Array | null;
    try {
      probs = await this.#vad(windows, this.#h, this.#c);
    } catch {
      probs = null;
    }
    const segments: LocalSegment[] = [];
    if (probs === null) {
      // Fail open: better to spend CPU on silence than to lose speech.
      this.stats.vadFailures++;
      this.#pass(windows, start);
    } else {
      const actions: GateAction[] = [];
      for (let at = 0, w = 0; at < whole; at += VAD_WINDOW_SAMPLES, w++) {
        this.#gate.window(windows.subarray(at, at + VAD_WINDOW_SAMPLES), start + at, probs[w]!, actions);
      }
      for (const a of actions) {
        if (a.kind === 'pass') {
          this.#pass(a.pcm, a.streamSample);
        } else {
          this.stats.regions++;
          this.#feed(segments);
          this.#inner.finalize(segments);
        }
      }
    }
    this.#feed(segments);
    this.#remap(segments, out);
  }

  /**
   * Passes on the held rest if speech is going on (else it is silence), then ends the speech region and the
   * recognizer's utterance: the next audio, after the end of the stream's audio or a gap in it, starts afresh.
   */
  finalize(out: LocalSegment[]): void {
    const rest = this.#rest;
    this.#rest = EMPTY;
    if (rest.length > 0 && this.#gate.speaking) this.#pass(rest, this.#restAt);
    this.#restAt += rest.length;
    if (this.#gate.end()) this.stats.regions++;
    const segments: LocalSegment[] = [];
    this.#feed(segments);
    this.#inner.finalize(segments);
    this.#remap(segments, out);
  }

  free(): void {
    this.#inner.free();
  }

  #pass(pcm: Int16Array, streamSample: number): void {
    this.#map.passed(streamSample, pcm.length);
    this.stats.passedSamples += pcm.length;
    const last = this.#passing[this.#passing.length - 1];
    // Windows of one batch lie side by side in its buffer: one view spans them, nothing is copied.
    if (last !== undefined && last.buffer === pcm.buffer && last.byteOffset + last.byteLength === pcm.byteOffset) {
      this.#passing[this.#passing.length - 1] = new Int16Array(last.buffer, last.byteOffset, last.length + pcm.length);
    } else {
      this.#passing.push(pcm);
    }
  }

  #feed(out: LocalSegment[]): void {
    if (this.#passing.length === 0) return;
    const pcm = this.#passing.length === 1 ? this.#passing[0]! : concatPcm(this.#passing);
    this.#passing = [];
    this.#inner.write(pcm, out);
  }

  #remap(segments: LocalSegment[], out: LocalSegment[]): void {
    const t = (s: number): number => this.#map.toStream(s);
    for (const s of segments) out.push({ text: s.text, start: t(s.start), end: t(s.end), words: s.words.map((w) => ({ word: w.word, start: t(w.start), end: t(w.end) })) });
  }
}

