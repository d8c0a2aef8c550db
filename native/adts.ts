// ADTS, the framing of the `aac` codec: each frame carries a 7- or 9-byte header with its length, rate and block count.
/** Sampling frequencies indexed by the ADTS `sampling_frequency_index`. */
const ADTS_RATES_HZ = [96000, 88200, 64000, 48000, 44100, 32000, 24000, 22050, 16000, 12000, 11025, 8000, 7350];

export interface AdtsFrame {
  /** Byte offset and length of the whole frame (header included) in the message. */
  offset: number;
  length: number;
  /** PCM samples the frame decodes to, at `sampleRate`. */
  samples: number;
  sampleRate: number;
}

/** Splits a message into ADTS frames; returns null if the bytes are not a sequence of whole ADTS frames. */
export function splitAdts(bytes: Uint8Array): AdtsFrame[] | null {
  const frames: AdtsFrame[] = [];
  let off = 0;
  while (off < bytes.length) {
    if (bytes.length - off < 7) return null;
    const b1 = bytes[off + 1]!;
    if (bytes[off] !== 0xff || (b1 & 0xf6) !== 0xf0) return null; // syncword 0xFFF, layer 00
    const b2 = bytes[off + 2]!;
    const rate = ADTS_RATES_HZ[(b2 >> 2) & 0x0f];
    const len = ((bytes[off + 3]! & 0x03) << 11) | (bytes[off + 4]! << 3) | (bytes[off + 5]! >> 5);
    const blocks = (bytes[off + 6]! & 0x03) + 1;
    const headerLen = (b1 & 0x01) === 1 ? 7 : 9;
    if (rate === undefined || len < headerLen || off + len > bytes.length) return null;
    frames.push({ offset: off, length: len, samples: 1024 * blocks, sampleRate: rate });
    off += len;
  }
  return frames;
}
