// How much audio one encoded listen message holds, read from its bytes alone (PCM size, Opus TOC, ADTS headers, LC3
// frames): every codec the listen route takes states it in the packet or its size, so nothing needs decoding.
import { LC3_FRAME_US, LC3_FS1030_FRAME_BYTES } from '../../workers/messages.js';
import { splitAdts } from '../../native/adts.js';

/** Opus frame durations in microseconds by TOC config (RFC 6716 §3.1): SILK 0–11, Hybrid 12–15, CELT 16–31. */
const OPUS_FRAME_US = Int32Array.from({ length: 32 }, (_, config) => {
  if (config < 12) return [10_000, 20_000, 40_000, 60_000][config % 4]!;
  if (config < 16) return [10_000, 20_000][config % 2]!;
  return [2_500, 5_000, 10_000, 20_000][config % 4]!;
});

/** Duration of one Opus packet in microseconds; 0 when it is too short to say. */
function opusPacketUs(p: Uint8Array): number {
  if (p.length < 1) return 0;
  const toc = p[0]!;
  const code = toc & 0x3;
  let frames: number;
  if (code === 0) frames = 1;
  else if (code < 3) frames = 2;
  else if (p.length >= 2) frames = p[1]! & 0x3f;
  else return 0;
  return frames * OPUS_FRAME_US[toc >> 3]!;
}

/**
 * Seconds of audio in one binary listen message of `codec` at `sampleRate` Hz. Two-channel sessions prefix every
 * message with a channel byte (0x01, 0x02); only channel 1 counts, so the result is stream time, not the sum of both.
 * Unknown codecs and unreadable bytes count as 0.
 */
export function encodedDurationS(codec: string, sampleRate: number, channels: number, message: Uint8Array): number {
  let m = message;
  if (channels === 2) {
    if (m[0] !== 0x01) return 0;
    m = m.subarray(1);
  }
  switch (codec) {
    case 'pcm8':
    case 'pcm16':
      // s16le at the session's rate (workers/messages.ts).
      return sampleRate > 0 ? Math.floor(m.length / 2) / sampleRate : 0;
    case 'opus':
    case 'opus_fs320':
      return opusPacketUs(m) / 1_000_000;
    case 'aac':
      // Whole ADTS frames only, as the decoder takes them.
      return (splitAdts(m) ?? []).reduce((s, f) => s + f.samples / f.sampleRate, 0);
    case 'lc3':
      return m.length > 0 ? LC3_FRAME_US / 1_000_000 : 0;
    case 'lc3_fs1030':
      return (Math.floor(m.length / LC3_FS1030_FRAME_BYTES) * LC3_FRAME_US) / 1_000_000;
    default:
      return 0;
  }
}
