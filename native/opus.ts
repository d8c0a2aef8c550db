// Typed wrapper over @discordjs/opus (libopus) for one stream: decode with packet-loss concealment, encode for tests.
import { createRequire } from 'node:module';

interface OpusCodec {
  encode(buf: Buffer): Buffer;
  decode(buf: Buffer): Buffer;
}
const { OpusEncoder } = createRequire(import.meta.url)('@discordjs/opus') as {
  OpusEncoder: new (rate: number, channels: number) => OpusCodec;
};

const EMPTY = Buffer.alloc(0);

/** A view of the decoder's Buffer as samples; copies only if the Buffer is not 2-byte aligned. */
function asInt16(buf: Buffer): Int16Array {
  if ((buf.byteOffset & 1) === 0) return new Int16Array(buf.buffer, buf.byteOffset, buf.byteLength >> 1);
  return new Int16Array(new Uint8Array(buf).buffer);
}

/** One mono Opus decoder per stream. Opus decodes any stream at any of its rates, so the rate here is the output rate. */
export class OpusDecoder {
  readonly #codec: OpusCodec;
  /**
   * @param sampleRateHz output rate in Hz (8000, 12000, 16000, 24000 or 48000)
   */
  constructor(sampleRateHz: number) {
    this.#codec = new OpusEncoder(sampleRateHz, 1);
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
