// One session's pocketsphinx decoder on its speech thread: utterances cut at a length limit, frames turned into seconds.
import { createPsDecoder, PS_FRAME_SAMPLES, type PsDecoder } from '../native/pocketsphinx.js';
import type { LocalSegment } from './speech-messages.js';

const SAMPLE_RATE_HZ = 16000;

/** What the speech gate feeds (PsRecognizer, or a test's stand-in); times count from the first sample it was given. */
export interface Recognizer {
  /** Feeds PCM in order; utterances closed on the way (at the length limit) are added to `out`. */
  write(pcm: Int16Array, out: LocalSegment[]): void;
  /** Ends the open utterance, adding its words to `out`. */
  finalize(out: LocalSegment[]): void;
  /** Frees the decoder; idempotent. */
  free(): void;
}

export class PsRecognizer implements Recognizer {
  readonly #decoder: PsDecoder;
  readonly #maxUtteranceSamples: number;
  /** Samples fed since the stream started. */
  #fedSamples = 0;
  /** Sample at which the open utterance began; -1 when none is open. */
  #uttStartSample = -1;

  /** Loads a decoder with the model in `modelDir` (synchronous: the thread does nothing else meanwhile). */
  constructor(modelDir: string, maxUtteranceSamples: number) {
    this.#decoder = createPsDecoder(modelDir);
    this.#maxUtteranceSamples = maxUtteranceSamples;
  }

  write(pcm: Int16Array, out: LocalSegment[]): void {
    let at = 0;
    while (at < pcm.length) {
      if (this.#uttStartSample < 0) this.#uttStartSample = this.#fedSamples;
      // Cut at the utterance limit: pocketsphinx only settles its words when the utterance ends.
      const room = this.#maxUtteranceSamples - (this.#fedSamples - this.#uttStartSample);
      const n = Math.min(room, pcm.length - at);
      this.#decoder.process(pcm.subarray(at, at + n));
      this.#fedSamples += n;
      at += n;
      if (this.#fedSamples - this.#uttStartSample >= this.#maxUtteranceSamples) this.#endUtterance(out);
    }
  }

  finalize(out: LocalSegment[]): void {
    if (this.#uttStartSample >= 0) this.#endUtterance(out);
  }

  free(): void {
    this.#decoder.free();
  }

  /** Ends the open utterance and converts its frames to seconds; adds nothing when it held no words. */
  #endUtterance(out: LocalSegment[]): void {
    const startSample = this.#uttStartSample;
    this.#uttStartSample = -1;
    const utt = this.#decoder.endUtterance();
    if (utt === null || utt.words.length === 0) return;
    const toSeconds = (frame: number): number => Math.round(((startSample + frame * PS_FRAME_SAMPLES) / SAMPLE_RATE_HZ) * 1000) / 1000;
    // The last frame ends 10 ms after it starts; no word may end past the audio actually fed.
    const limit = this.#fedSamples / SAMPLE_RATE_HZ;
    const words = utt.words.map(([word, sf, ef]) => ({ word, start: Math.min(toSeconds(sf), limit), end: Math.min(toSeconds(ef + 1), limit) }));
    out.push({ text: words.map((w) => w.word).join(' '), start: words[0]!.start, end: words[words.length - 1]!.end, words });
  }
}
