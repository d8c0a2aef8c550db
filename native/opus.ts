// Opus for one stream: decoding through our addon over Debian's libopus (native/opus.cc, into caller-owned arrays),
// encoding (tests and benches) through @discordjs/opus.
import { createRequire } from 'node:module';
import { loadAddon } from './addon.js';

interface NativeOpusDecoder {
  /** Samples written at `offset`, or a negative libopus error; a null packet conceals `samples` samples. */
  decodeInto(packet: Uint8Array | null, out: Int16Array, offset: number, samples: number): number;
  /** Frees the libopus state now; later calls throw. Idempotent. */
  free(): void;
}
interface NativeOpusModule {
  OpusDecoder: new (sampleRateHz: number) => NativeOpusDecoder;
  /** libopus decoder state, bytes (opus_decoder_get_size for one channel). */
  decoderBytes: number;
}
interface OpusEncoderCodec {
  encode(buf: Buffer): Buffer;
}

const native = loadAddon<NativeOpusModule>('opus', 'Opus');
type EncoderClass = new (rate: number, channels: number) => OpusEncoderCodec;
/** Loaded by the first encoder: a process that only decodes (the service) never needs @discordjs/opus. */
let OpusEncoder: EncoderClass | undefined;

/** libopus error codes decodeInto() can answer. */
export const OPUS_BUFFER_TOO_SMALL = -2;

/** The longest Opus packet, 120 ms, in samples at `sampleRateHz`. */
export const maxPacketSamples = (sampleRateHz: number): number => (sampleRateHz * 120) / 1000;

/** What a released OpusDecoder holds instead of its codec: any use throws. */
const RELEASED: NativeOpusDecoder = {
  decodeInto: () => {
    throw new Error('opus decoder used after release()');
  },
  free: () => undefined,
};

/** Native memory of one decoder's libopus state, in bytes. */
export const OPUS_DECODER_BYTES = native.decoderBytes;

/** One mono Opus decoder per stream. Opus decodes any stream at any of its rates, so the rate here is the output rate. */
export class OpusDecoder {
  #codec: NativeOpusDecoder;
  readonly #rate: number;
  /**
   * @param sampleRateHz output rate in Hz (8000, 12000, 16000, 24000 or 48000)
   */
  constructor(sampleRateHz: number) {
    this.#rate = sampleRateHz;
    this.#codec = new native.OpusDecoder(sampleRateHz);
  }

  /** Output rate in Hz. */
  get sampleRateHz(): number {
    return this.#rate;
  }

  /**
   * Frees the decoder's native state now; this object must not be used after. Idempotent.
   *
   * Rationale: its native state is invisible to V8, so a dropped decoder would wait for a full GC, which a codec thread
   * with a small heap runs seldom and an idle one never; a pool would keep the peak for good. Freed here, malloc reuses
   * the memory for the next sessions and hands it back to the kernel when idle (engine/runtime/memory-trim.ts).
   */
  release(): void {
    const codec = this.#codec;
    this.#codec = RELEASED;
    codec.free();
  }

  /**
   * Decodes one packet into `out` from `offset`: the samples written, or a negative libopus error: corrupt packet
   * (the decoder stays usable), or OPUS_BUFFER_TOO_SMALL when `out` lacks the room (up to maxPacketSamples).
   */
  decodeInto(packet: Uint8Array, out: Int16Array, offset: number): number {
    return this.#codec.decodeInto(packet, out, offset, 0);
  }

  /** Conceals one lost packet of `samples` samples (a multiple of 2.5 ms) into `out` at `offset`; answers as decodeInto. */
  concealInto(samples: number, out: Int16Array, offset: number): number {
    return this.#codec.decodeInto(null, out, offset, samples);
  }

  /** Decodes one packet into a new array; throws on a corrupt packet (the decoder stays usable). */
  decode(packet: Uint8Array): Int16Array {
    const out = new Int16Array(maxPacketSamples(this.#rate));
    const n = this.decodeInto(packet, out, 0);
    if (n < 0) throw new Error(`opus decode failed (${n})`);
    return out.subarray(0, n);
  }
}

/** One mono Opus encoder (tests and benches). */
export class OpusEncoderStream {
  readonly #codec: OpusEncoderCodec;
  constructor(sampleRateHz: number) {
    OpusEncoder ??= (createRequire(import.meta.url)('@discordjs/opus') as { OpusEncoder: EncoderClass }).OpusEncoder;
    this.#codec = new OpusEncoder(sampleRateHz, 1);
  }
  /** Encodes one frame (2.5–60 ms of samples) into one packet. */
  encode(pcm: Int16Array): Uint8Array {
    return new Uint8Array(this.#codec.encode(Buffer.from(pcm.buffer, pcm.byteOffset, pcm.byteLength)));
  }
}
