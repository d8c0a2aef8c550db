// One session's pocketsphinx decoder on its speech thread: utterances cut at a pause once they are long enough, or at the
// quietest moment before a length bound, and frames turned into seconds.
import { createPsDecoder, PS_FRAME_SAMPLES, type PsDecoder } from '../native/pocketsphinx.js';
import type { LocalSegment } from './speech-messages.js';
import { concatPcm } from './packing.js';

const SAMPLE_RATE_HZ = 16000;
/** A frame quieter than the utterance's loudest (slowly decaying) frame by this energy ratio (25 dB) is a pause. */
const QUIET_RATIO = 10 ** -2.5;
/** ...or quieter than this mean square (about -61 dBFS), whatever the level. */
const QUIET_FLOOR = 900;
/** Decay of the loudest frame's energy per 10 ms frame (about 4 dB a second). */
const LOUD_DECAY = 0.999;
/** Quiet frames in a row that make a pause long enough to cut at (200 ms: longer than a stop consonant's closure). */
const PAUSE_FRAMES = 20;
/** Frames averaged when looking for the quietest moment (50 ms), so that one quiet frame inside a word does not win. */
const SMOOTH_FRAMES = 5;

/** What the speech gate feeds (PsRecognizer, or a test's stand-in); times count from the first sample it was given. */
export interface Recognizer {
  /** Feeds PCM in order; utterances closed on the way (at a pause or the length bound) are added to `out`. */
  write(pcm: Int16Array, out: LocalSegment[]): void;
  /** Ends the open utterance, adding its words to `out`. */
  finalize(out: LocalSegment[]): void;
  /** Frees the decoder; idempotent. */
  free(): void;
}

/**
 * Rationale: pocketsphinx settles its words only when an utterance ends, so an utterance's length is the latency of its
 * first word. Past 3/8 of the bound, a 200 ms pause ends the utterance; the last 3/16 before the bound is held back
 * undecoded so that, if no pause came, the cut falls at its quietest 50 ms rather than inside a word.
 */
export class PsRecognizer implements Recognizer {
  readonly #decoder: PsDecoder;
  /** Frames (10 ms) an utterance may last. */
  readonly #maxFrames: number;
  /** From this many frames on, a pause ends the utterance. */
  readonly #pauseFromFrames: number;
  /** From this many frames on, audio is held back to choose the cut. */
  readonly #holdFromFrames: number;
  /** Samples fed to the decoder since the stream started. */
  #fedSamples = 0;
  /** Sample at which the open utterance began; -1 when none is open. */
  #uttStartSample = -1;
  /** Whole frames of the open utterance, decoded or held. */
  #uttFrames = 0;
  /** Energy of the samples of the frame under way, and how many it has. */
  #acc = 0;
  #fill = 0;
  #loud = 0;
  #quietRun = 0;
  /** Audio held back near the bound (copies), and the energy of each of its whole frames. */
  #held: Int16Array[] = [];
  #heldEnergy: number[] = [];

  /** Loads a decoder with the model in `modelDir` (synchronous: the thread does nothing else meanwhile); tests may pass their own. */
  constructor(modelDir: string, maxUtteranceSamples: number, decoder: PsDecoder = createPsDecoder(modelDir)) {
    this.#decoder = decoder;
    this.#maxFrames = Math.max(16, Math.floor(maxUtteranceSamples / PS_FRAME_SAMPLES));
    this.#pauseFromFrames = Math.round((this.#maxFrames * 3) / 8);
    this.#holdFromFrames = this.#maxFrames - Math.round((this.#maxFrames * 3) / 16);
  }

  write(pcm: Int16Array, out: LocalSegment[]): void {
    /** pcm[0, done) was decoded or held. */
    let done = 0;
    let at = 0;
    while (at < pcm.length) {
      const n = Math.min(PS_FRAME_SAMPLES - this.#fill, pcm.length - at);
      let e = 0;
      for (let i = at; i < at + n; i++) e += pcm[i]! * pcm[i]!;
      this.#acc += e;
      this.#fill += n;
      at += n;
      if (this.#fill < PS_FRAME_SAMPLES) break;
      const energy = this.#acc / PS_FRAME_SAMPLES;
      this.#acc = 0;
      this.#fill = 0;
      this.#uttFrames++;
      this.#loud = Math.max(this.#loud * LOUD_DECAY, energy);
      this.#quietRun = energy < QUIET_FLOOR || energy < this.#loud * QUIET_RATIO ? this.#quietRun + 1 : 0;
      if (this.#uttFrames > this.#holdFromFrames) this.#heldEnergy.push(energy);
      if (this.#uttFrames >= this.#pauseFromFrames && this.#quietRun >= PAUSE_FRAMES) {
        this.#take(pcm.subarray(done, at));
        done = at;
        this.#release(this.#held.length > 0 ? concatPcm(this.#held) : null);
        this.#endUtterance(out);
      } else if (this.#uttFrames === this.#holdFromFrames) {
        this.#take(pcm.subarray(done, at));
        done = at;
      } else if (this.#uttFrames >= this.#maxFrames) {
        this.#take(pcm.subarray(done, at));
        done = at;
        this.#cutAtQuietest(out);
      }
    }
    this.#take(pcm.subarray(done));
  }

  finalize(out: LocalSegment[]): void {
    if (this.#held.length > 0) this.#release(concatPcm(this.#held));
    if (this.#uttStartSample >= 0) this.#endUtterance(out);
  }

  free(): void {
    this.#decoder.free();
  }

  /** Decodes `pcm`, or holds a copy of it once the utterance is near its bound. */
  #take(pcm: Int16Array): void {
    if (pcm.length === 0) return;
    if (this.#uttStartSample < 0) this.#uttStartSample = this.#fedSamples;
    if (this.#uttFrames > this.#holdFromFrames || (this.#uttFrames === this.#holdFromFrames && this.#fill > 0)) {
      this.#held.push(pcm.slice());
      return;
    }
    this.#decoder.process(pcm);
    this.#fedSamples += pcm.length;
  }

  /** Decodes what was held (`pcm`, or nothing) and forgets it. */
  #release(pcm: Int16Array | null): void {
    this.#held = [];
    this.#heldEnergy = [];
    if (pcm === null || pcm.length === 0) return;
    if (this.#uttStartSample < 0) this.#uttStartSample = this.#fedSamples;
    this.#decoder.process(pcm);
    this.#fedSamples += pcm.length;
  }

  /** At the bound: the held audio up to its quietest 50 ms ends the utterance, the rest begins the next one. */
  #cutAtQuietest(out: LocalSegment[]): void {
    const held = concatPcm(this.#held);
    const energy = this.#heldEnergy;
    let best = energy.length;
    let bestSum = Infinity;
    let sum = 0;
    for (let f = 0; f < energy.length; f++) {
      sum += energy[f]!;
      if (f >= SMOOTH_FRAMES) sum -= energy[f - SMOOTH_FRAMES]!;
      // Ties go to the later moment: the utterance keeps as much as it can.
      if (f >= SMOOTH_FRAMES - 1 && sum <= bestSum) {
        bestSum = sum;
        best = f + 1 - (SMOOTH_FRAMES >> 1);
      }
    }
    const cut = Math.min(held.length, best * PS_FRAME_SAMPLES);
    this.#release(held.subarray(0, cut));
    this.#endUtterance(out);
    if (cut < held.length) this.write(held.subarray(cut), out);
  }

  /** Ends the open utterance and converts its frames to seconds; adds nothing when it held no words. */
  #endUtterance(out: LocalSegment[]): void {
    const startSample = this.#uttStartSample;
    this.#uttStartSample = -1;
    this.#uttFrames = 0;
    this.#quietRun = 0;
    // Cuts fall between frames; only finalize() ends an utterance inside one, whose samples it decoded.
    this.#acc = 0;
    this.#fill = 0;
    if (startSample < 0) return;
    const utt = this.#decoder.endUtterance();
    if (utt === null || utt.words.length === 0) return;
    const toSeconds = (frame: number): number => Math.round(((startSample + frame * PS_FRAME_SAMPLES) / SAMPLE_RATE_HZ) * 1000) / 1000;
    // The last frame ends 10 ms after it starts; no word may end past the audio actually fed.
    const limit = this.#fedSamples / SAMPLE_RATE_HZ;
    const words = utt.words.map(([word, sf, ef]) => ({ word, start: Math.min(toSeconds(sf), limit), end: Math.min(toSeconds(ef + 1), limit) }));
    out.push({ text: words.map((w) => w.word).join(' '), start: words[0]!.start, end: words[words.length - 1]!.end, words });
  }
}
