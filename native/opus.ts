// Typed wrapper over @discordjs/opus (libopus) for one stream: decode with packet-loss concealment, encode for tests.
import { createRequire } from 'node:module';

interface OpusCodec {
  encode(buf: Buffer): Buffer;
  decode(buf: Buffer): Buffer;
  applyDecoderCTL(ctl: number, value: number): void;
}
const { OpusEncoder } = createRequire(import.meta.url)('@discordjs/opus') as {
  OpusEncoder: new (rate: number, channels: number) => OpusCodec;
};

const EMPTY = Buffer.alloc(0);

/** What a released OpusDecoder holds instead of its codec: any use throws. */
const RELEASED: OpusCodec = {
  encode: () => {
    throw new Error('opus decoder used after release()');
  },
  decode: () => {
    throw new Error('opus decoder used after release()');
  },
  applyDecoderCTL: () => undefined,
};

/** A view of the decoder's Buffer as samples; copies only if the Buffer is not 2-byte aligned. */
function asInt16(buf: Buffer): Int16Array {
  if ((buf.byteOffset & 1) === 0) return new Int16Array(buf.buffer, buf.byteOffset, buf.byteLength >> 1);
  return new Int16Array(new Uint8Array(buf).buffer);
}

/** libopus OPUS_RESET_STATE: the decoder forgets the previous stream (as if new). */
const OPUS_RESET_STATE = 4028;
/**
 * Released decoders, reset, per output rate. Rationale: each holds ~30 KB of native memory that V8 does not see, so
 * dropped decoders wait for a full GC that a thread with a small heap seldom runs; sessions that come and go all day
 * grew the process by that much per session (churn bench). Reuse bounds it by the most decoders ever open at once.
 */
const spare = new Map<number, OpusCodec[]>();
const MAX_SPARE_PER_RATE = 4096;

/** Decoders kept for reuse, over all rates (tests and metrics). */
export function spareOpusDecoders(): number {
  let n = 0;
  for (const list of spare.values()) n += list.length;
  return n;
}

/** One mono Opus decoder per stream. Opus decodes any stream at any of its rates, so the rate here is the output rate. */
export class OpusDecoder {
  #codec: OpusCodec;
  readonly #rate: number;
  /**
   * @param sampleRateHz output rate in Hz (8000, 12000, 16000, 24000 or 48000)
   */
  constructor(sampleRateHz: number) {
    this.#rate = sampleRateHz;
    this.#codec = spare.get(sampleRateHz)?.pop() ?? new OpusEncoder(sampleRateHz, 1);
  }

  /** Hands the native decoder back for reuse, reset; this object must not be used after. Idempotent. */
  release(): void {
    const codec = this.#codec;
    if (codec === RELEASED) return;
    this.#codec = RELEASED;
    let list = spare.get(this.#rate);
    if (!list) spare.set(this.#rate, (list = []));
    if (list.length >= MAX_SPARE_PER_RATE) return;
    codec.applyDecoderCTL(OPUS_RESET_STATE, 0);
    list.push(codec);
  }

  /** Decodes one packet into native-endian Int16 samples; throws on a corrupt packet (the decoder stays usable). */
  decode(packet: Uint8Array): Int16Array {
    return asInt16(this.#codec.decode(Buffer.from(packet.buffer, packet.byteOffset, packet.byteLength)));
  }

  /**
   * Conceals one lost packet of `samples` samples. @discordjs/opus asks libopus for its maximum frame (120 ms at
   * 48 kHz), so we keep the first `samples`: the part of the concealment closest to the real signal.
   */
  conceal(samples: number): Int16Array {
    const out = asInt16(this.#codec.decode(EMPTY));
    return out.subarray(0, Math.min(samples, out.length));
  }
}

/** One mono Opus encoder (tests and benches). */
export class OpusEncoderStream {
  readonly #codec: OpusCodec;
  constructor(sampleRateHz: number) {
    this.#codec = new OpusEncoder(sampleRateHz, 1);
  }
  /** Encodes one frame (2.5–60 ms of samples) into one packet. */
  encode(pcm: Int16Array): Uint8Array {
    return new Uint8Array(this.#codec.encode(Buffer.from(pcm.buffer, pcm.byteOffset, pcm.byteLength)));
  }
}
