// Uploaded audio to 16 kHz mono PCM: WAV files, devices' `.bin` files of length-prefixed Opus packets, raw linear16.
// Offline sync reads the same `.bin` files, so parseOpusBin() and decodeOpusBin() stand on their own.
import { parseWav as readWav, WavError } from '../audio/wav.js';
import { OpusDecoder, maxPacketSamples } from '../../native/opus.js';
import { Resampler } from '../../workers/resample.js';
import { concatPcm } from '../../workers/packing.js';

/** The rate every engine takes. */
export const SAMPLE_RATE_HZ = 16000;
/** Longest audio one upload may decode to, in seconds: bounds the memory a small Opus file can expand into. */
export const MAX_AUDIO_S = 900;
const MAX_SAMPLES = MAX_AUDIO_S * SAMPLE_RATE_HZ;
/** Input rates and channel counts accepted (WAV and raw PCM). */
export const MIN_RATE_HZ = 8000;
export const MAX_RATE_HZ = 48000;
export const MAX_CHANNELS = 2;
/** Frame size of a `.bin` file without `_fs<N>`, in samples at 16 kHz (20 ms). */
export const DEFAULT_FRAME_SAMPLES = 160;
/** Earliest timestamp a `.bin` file name may carry (2024-01-01T00:00:00Z), as the compatible system checks. */
const EARLIEST_BIN_S = 1_704_067_200;
/** How far ahead of this node's clock a device's timestamp may be, in seconds. */
const BIN_CLOCK_SKEW_S = 3600;
/** Opus frame durations (2.5 to 120 ms) at 16 kHz: the only `_fs<N>` values a device can mean. */
const OPUS_FRAME_SAMPLES = new Set([40, 80, 160, 320, 640, 960, 1280, 1600, 1920]);

/** Why an upload cannot be decoded; `reason` is public-safe (it names the rule, never the bytes or the file name). */
export class AudioInputError extends Error {
  constructor(readonly reason: string) {
    super(reason);
    this.name = 'AudioInputError';
  }
}

/** Interleaved PCM as read from a file, before it is brought to 16 kHz mono. */
export interface Pcm {
  samples: Int16Array;
  rateHz: number;
  channels: number;
}

function checkFormat(rateHz: number, channels: number): void {
  if (!Number.isInteger(rateHz) || rateHz < MIN_RATE_HZ || rateHz > MAX_RATE_HZ) throw new AudioInputError(`the sample rate must be ${MIN_RATE_HZ} to ${MAX_RATE_HZ} Hz`);
  if (!Number.isInteger(channels) || channels < 1 || channels > MAX_CHANNELS) throw new AudioInputError(`audio must have 1 or ${MAX_CHANNELS} channels`);
}

function checkLength(frames: number, rateHz: number): void {
  if (frames / rateHz > MAX_AUDIO_S) throw new AudioInputError(`audio may be at most ${MAX_AUDIO_S} seconds long`);
}

/** Brings interleaved PCM to 16 kHz mono: channels averaged, then resampled band-limited. */
export function toMono16k(pcm: Pcm): Int16Array {
  const { samples, rateHz, channels } = pcm;
  let mono = samples;
  if (channels > 1) {
    mono = new Int16Array(Math.floor(samples.length / channels));
    for (let i = 0, j = 0; i < mono.length; i++, j += channels) {
      let sum = 0;
      for (let c = 0; c < channels; c++) sum += samples[j + c]!;
      mono[i] = Math.round(sum / channels);
    }
  }
  if (rateHz === SAMPLE_RATE_HZ) return mono;
  const r = new Resampler(rateHz, SAMPLE_RATE_HZ);
  const head = r.push(mono);
  const tail = r.flush();
  // The flush pads past the end: keep the length the input's duration gives.
  const want = Math.round((mono.length * SAMPLE_RATE_HZ) / rateHz);
  const out = new Int16Array(want);
  out.set(head.subarray(0, want));
  if (head.length < want) out.set(tail.subarray(0, want - head.length), head.length);
  return out;
}

/** Little-endian linear16 bytes (a raw upload) as samples; the length must be whole frames. */
export function linear16(bytes: Uint8Array, rateHz: number, channels: number): Pcm {
  checkFormat(rateHz, channels);
  if (bytes.byteLength % (2 * channels) !== 0) throw new AudioInputError('linear16 audio must be whole 16-bit samples of every channel');
  checkLength(bytes.byteLength / (2 * channels), rateHz);
  const samples = new Int16Array(bytes.byteLength / 2);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  for (let i = 0; i < samples.length; i++) samples[i] = view.getInt16(i * 2, true);
  return { samples, rateHz, channels };
}

/** PCM of a RIFF/WAVE file: integer PCM of 8, 16, 24 or 32 bits, or 32-bit float; 8-48 kHz, one or two channels. */
export function parseWav(bytes: Uint8Array): Pcm {
  let wav;
  try {
    wav = readWav(bytes);
  } catch (err) {
    if (err instanceof WavError) throw new AudioInputError(err.message === 'not a WAV file' ? 'a .wav file is not RIFF/WAVE audio' : `a .wav file is not readable: ${err.message}`);
    throw err;
  }
  return wavSamples(wav.data, { format: wav.format, channels: wav.channels, rateHz: wav.sampleRate, bits: wav.bitsPerSample });
}

function wavSamples(data: Uint8Array, fmt: { format: number; channels: number; rateHz: number; bits: number }): Pcm {
  const { format, channels, rateHz, bits } = fmt;
  checkFormat(rateHz, channels);
  const pcmInt = format === 1 && (bits === 8 || bits === 16 || bits === 24 || bits === 32);
  const float = format === 3 && bits === 32;
  if (!pcmInt && !float) throw new AudioInputError('a .wav file must hold integer PCM (8, 16, 24 or 32 bits) or 32-bit float');
  const width = bits / 8;
  const count = Math.floor(data.byteLength / (width * channels)) * channels;
  checkLength(count / channels, rateHz);
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  const samples = new Int16Array(count);
  for (let i = 0; i < count; i++) {
    const o = i * width;
    if (float) samples[i] = Math.max(-32768, Math.min(32767, Math.round(view.getFloat32(o, true) * 32768)));
    else if (bits === 8) samples[i] = (data[o]! - 128) << 8;
    else if (bits === 16) samples[i] = view.getInt16(o, true);
    else if (bits === 24) samples[i] = view.getInt16(o + 1, true);
    else samples[i] = view.getInt16(o + 2, true);
  }
  return { samples, rateHz, channels };
}

/** A device's `.bin` file, parsed: when it started, its frame size and its Opus packets (views of the file). */
export interface OpusBin {
  /** Unix time, in seconds, from the file name. */
  startedAtS: number;
  /** Samples per frame at 16 kHz (`_fs<N>`, else 160). */
  frameSamples: number;
  packets: Uint8Array[];
}

const BIN_NAME = /^(.+)_(\d{1,12})(?:_fs(\d{1,5}))?\.bin$/;

/**
 * Parses a `.bin` upload: its name must be `<name>_<unix-ts>[_fs<N>].bin` (timestamp from 2024-01-01 to `nowMs`, an
 * hour of skew allowed), its content 4-byte little-endian lengths each followed by that many bytes of one Opus packet.
 */
export function parseOpusBin(bytes: Uint8Array, filename: string, nowMs: number): OpusBin {
  const m = BIN_NAME.exec(filename);
  if (!m) throw new AudioInputError('a .bin file must be named <name>_<unix-ts>[_fs<N>].bin');
  const startedAtS = Number(m[2]);
  if (startedAtS < EARLIEST_BIN_S || startedAtS > nowMs / 1000 + BIN_CLOCK_SKEW_S) throw new AudioInputError('the timestamp in a .bin file name must lie between 2024-01-01 and now');
  const frameSamples = m[3] === undefined ? DEFAULT_FRAME_SAMPLES : Number(m[3]);
  if (!OPUS_FRAME_SAMPLES.has(frameSamples)) throw new AudioInputError('the _fs<N> frame size of a .bin file must be an Opus frame size at 16 kHz (40 to 1920)');
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const packets: Uint8Array[] = [];
  let at = 0;
  while (at < bytes.byteLength) {
    if (at + 4 > bytes.byteLength) throw new AudioInputError('a .bin file ends inside a length prefix');
    const length = view.getUint32(at, true);
    at += 4;
    // RFC 6716: an Opus packet is at most 1275 bytes per frame and 120 ms; 0 is no packet at all.
    if (length === 0 || length > 1275 * 48) throw new AudioInputError('a .bin file holds a packet length no Opus packet has');
    if (at + length > bytes.byteLength) throw new AudioInputError('a .bin file ends inside a packet');
    packets.push(bytes.subarray(at, at + length));
    at += length;
  }
  if (packets.length === 0) throw new AudioInputError('a .bin file holds no packets');
  return { startedAtS, frameSamples, packets };
}

/**
 * Decodes a `.bin` file's packets to 16 kHz mono. A packet libopus refuses is concealed (one frame of the file's
 * frame size), as a live session skips a corrupt frame; a file none of whose packets decodes is refused.
 */
export function decodeOpusBin(bin: OpusBin): Int16Array {
  const decoder = new OpusDecoder(SAMPLE_RATE_HZ);
  try {
    let out = new Int16Array(Math.min(MAX_SAMPLES, bin.packets.length * bin.frameSamples) + maxPacketSamples(SAMPLE_RATE_HZ));
    let n = 0;
    let decoded = 0;
    for (const packet of bin.packets) {
      if (out.length - n < maxPacketSamples(SAMPLE_RATE_HZ)) {
        if (n >= MAX_SAMPLES) throw new AudioInputError(`audio may be at most ${MAX_AUDIO_S} seconds long`);
        const grown = new Int16Array(Math.min(MAX_SAMPLES, out.length * 2) + maxPacketSamples(SAMPLE_RATE_HZ));
        grown.set(out.subarray(0, n));
        out = grown;
      }
      let got = decoder.decodeInto(packet, out, n);
      if (got >= 0) decoded++;
      else got = Math.max(0, decoder.concealInto(bin.frameSamples, out, n));
      n += got;
    }
    if (decoded === 0) throw new AudioInputError('a .bin file holds no decodable Opus packet');
    if (n > MAX_SAMPLES) throw new AudioInputError(`audio may be at most ${MAX_AUDIO_S} seconds long`);
    return out.slice(0, n);
  } finally {
    decoder.release();
  }
}

/** One uploaded file to 16 kHz mono, by its extension (`.wav` or `.bin`). */
export function decodeFile(bytes: Uint8Array, filename: string, nowMs: number): Int16Array {
  const lower = filename.toLowerCase();
  if (lower.endsWith('.wav')) return toMono16k(parseWav(bytes));
  if (lower.endsWith('.bin')) return decodeOpusBin(parseOpusBin(bytes, filename, nowMs));
  throw new AudioInputError('files must be .wav audio or .bin Opus packets');
}

/** Joins decoded files in upload order; refuses a total past MAX_AUDIO_S. */
export function joinPcm(parts: readonly Int16Array[]): Int16Array {
  const total = parts.reduce((sum, p) => sum + p.length, 0);
  if (total > MAX_SAMPLES) throw new AudioInputError(`audio may be at most ${MAX_AUDIO_S} seconds long`);
  return parts.length === 1 ? parts[0]! : concatPcm(parts);
}
