// Typed loader for the LC3 addon (native/lc3.cc over Debian's liblc3); the build lives in native/build/Release.
import { loadAddon } from './addon.js';

interface NativeLc3Decoder {
  /** Decodes one frame (null or empty = lost frame, concealed) into `out` at `offsetSamples`; 0 decoded, 1 concealed. */
  decodeInto(frame: Uint8Array | null, out: Int16Array, offsetSamples: number): number;
  readonly frameSamples: number;
  /** Frees the liblc3 state now; later calls throw. Idempotent. */
  free(): void;
}
interface NativeLc3Encoder {
  encodeInto(pcm: Int16Array, out: Uint8Array): void;
  readonly frameSamples: number;
}
interface NativeLc3Module {
  Lc3Decoder: new (frameDurationUs: number, sampleRateHz: number) => NativeLc3Decoder;
  Lc3Encoder: new (frameDurationUs: number, sampleRateHz: number) => NativeLc3Encoder;
}


const lc3 = loadAddon<NativeLc3Module>('lc3', 'LC3');

/** LC3 frame durations liblc3 supports, in microseconds. */
export const LC3_FRAME_DURATIONS_US = [7500, 10000] as const;
/** LC3 sample rates liblc3 supports, in Hz. */
export const LC3_SAMPLE_RATES_HZ = [8000, 16000, 24000, 32000, 48000] as const;
/** Frame size bounds in bytes (liblc3 LC3_MIN_FRAME_BYTES / LC3_MAX_FRAME_BYTES). */
export const LC3_MIN_FRAME_BYTES = 20;
export const LC3_MAX_FRAME_BYTES = 400;

/** One LC3 decoder per stream: its state carries from frame to frame. The frame size is taken from each call. */
export class Lc3Decoder {
  readonly #native: NativeLc3Decoder;
  /** PCM samples per frame at the decoder's sample rate. */
  readonly frameSamples: number;
  /** Whether the last `decode` call concealed (a lost or undecodable frame) instead of decoding. */
  concealed = false;

  /**
   * @param frameDurationUs frame duration in microseconds (7500 or 10000)
   * @param sampleRateHz output sample rate in Hz (8000, 16000, 24000, 32000 or 48000)
   */
  constructor(frameDurationUs: number, sampleRateHz: number) {
    this.#native = new lc3.Lc3Decoder(frameDurationUs, sampleRateHz);
    this.frameSamples = this.#native.frameSamples;
  }

  /** Decodes one frame; `null` or an empty frame runs packet-loss concealment. Throws on a frame outside 20..400 bytes. */
  decode(frame: Uint8Array | null): Int16Array {
    const out = new Int16Array(this.frameSamples);
    this.concealed = this.#native.decodeInto(frame, out, 0) === 1;
    return out;
  }

  /** Decodes into `out` at `offsetSamples` (batch decoding without an allocation per frame); true if concealed. */
  decodeInto(frame: Uint8Array | null, out: Int16Array, offsetSamples: number): boolean {
    return this.#native.decodeInto(frame, out, offsetSamples) === 1;
  }

  /**
   * Frees the decoder's native state now (as OpusDecoder.release() does, which says why); later calls throw.
   * Idempotent.
   */
  release(): void {
    this.#native.free();
  }
}

/** One LC3 encoder per stream; mostly for tests and benches. */
export class Lc3Encoder {
  readonly #native: NativeLc3Encoder;
  readonly frameSamples: number;

  constructor(frameDurationUs: number, sampleRateHz: number) {
    this.#native = new lc3.Lc3Encoder(frameDurationUs, sampleRateHz);
    this.frameSamples = this.#native.frameSamples;
  }

  /** Encodes one frame of `frameSamples` samples into a frame of `frameBytes` bytes (20..400). */
  encode(pcm: Int16Array, frameBytes: number): Uint8Array {
    const out = new Uint8Array(frameBytes);
    this.#native.encodeInto(pcm, out);
    return out;
  }
}
