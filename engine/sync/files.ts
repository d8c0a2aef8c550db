// The files a device recorded offline, by name: what each holds, when it started, how long it lasts, and its audio as
// 16 kHz mono PCM. Names carry the recording's start (unix seconds), since a batch is placed by wall-clock time:
//   <name>_<unix-ts>[_fs<N>].bin  length-prefixed Opus packets (the voice-message format, N samples per frame)
//   <name>_<unix-ts>_<codec>.bin  length-prefixed frames of a live codec: opus, opus_fs320, pcm8, pcm16
//   <name>_<unix-ts>.wav          RIFF/WAVE, 8-48 kHz, one or two channels
import { createHash } from 'node:crypto';
import { AudioInputError, SAMPLE_RATE_HZ, decodeOpusBin, linear16, parseOpusBin, parseWav, toMono16k, type OpusBin, type Pcm } from '../voice/audio.js';

/** A parsed file: its start and length known without decoding, its audio decoded on demand (in the job). */
export interface SyncAudio {
  startedAtMs: number;
  durationS: number;
  decode(): Int16Array;
}

const FRAME_FILE = /^(.+)_(\d{1,12})_(opus|opus_fs320|pcm8|pcm16)\.bin$/;
const WAV_FILE = /^(.+)_(\d{1,12})\.wav$/i;
/** A file name is a name, never a path: the same rule for every form. */
const SAFE_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$/;

function opusFile(bin: OpusBin): SyncAudio {
  return { startedAtMs: bin.startedAtS * 1000, durationS: (bin.packets.length * bin.frameSamples) / SAMPLE_RATE_HZ, decode: () => decodeOpusBin(bin) };
}

/** Length-prefixed frames of raw little-endian 16-bit PCM, joined. */
function pcmFrames(bytes: Uint8Array, rateHz: number): Pcm {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const parts: Uint8Array[] = [];
  let total = 0;
  let at = 0;
  while (at < bytes.byteLength) {
    if (at + 4 > bytes.byteLength) throw new AudioInputError('a frame file ends inside a length prefix');
    const length = view.getUint32(at, true);
    at += 4;
    if (length === 0 || length % 2 !== 0 || at + length > bytes.byteLength) throw new AudioInputError('a PCM frame file holds a frame that is not whole 16-bit samples');
    parts.push(bytes.subarray(at, at + length));
    total += length;
    at += length;
  }
  if (total === 0) throw new AudioInputError('a frame file holds no frames');
  const joined = new Uint8Array(total);
  let o = 0;
  for (const p of parts) {
    joined.set(p, o);
    o += p.byteLength;
  }
  return linear16(joined, rateHz, 1);
}

/** Checks a name's timestamp as the `.bin` rule does (2024-01-01 to an hour past now). */
function timestampMs(ts: string, nowMs: number): number {
  // parseOpusBin holds the rule; a one-packet probe applies it to any name.
  return parseOpusBin(new Uint8Array([1, 0, 0, 0, 0xf8]), `x_${ts}.bin`, nowMs).startedAtS * 1000;
}

/**
 * Parses one offline file by its name. Throws AudioInputError (public-safe: it names the rule broken) for a name out
 * of the scheme, a timestamp out of range, or content that is not what the name says.
 */
export function parseSyncFile(bytes: Uint8Array, filename: string, nowMs: number): SyncAudio {
  if (!SAFE_NAME.test(filename)) throw new AudioInputError('a file name may hold only letters, digits, dots, dashes and underscores');
  const frame = FRAME_FILE.exec(filename);
  if (frame) {
    const [, , ts, codec] = frame;
    if (codec === 'opus' || codec === 'opus_fs320') return opusFile(parseOpusBin(bytes, `x_${ts}${codec === 'opus' ? '' : '_fs320'}.bin`, nowMs));
    const startedAtMs = timestampMs(ts!, nowMs);
    const pcm = pcmFrames(bytes, codec === 'pcm8' ? 8000 : 16000);
    return { startedAtMs, durationS: pcm.samples.length / pcm.rateHz, decode: () => toMono16k(pcm) };
  }
  if (filename.toLowerCase().endsWith('.bin')) return opusFile(parseOpusBin(bytes, filename, nowMs));
  const wav = WAV_FILE.exec(filename);
  if (wav) {
    const startedAtMs = timestampMs(wav[2]!, nowMs);
    const pcm = parseWav(bytes);
    return { startedAtMs, durationS: pcm.samples.length / pcm.channels / pcm.rateHz, decode: () => toMono16k(pcm) };
  }
  throw new AudioInputError('files must be named <name>_<unix-ts>[_fs<N>].bin, <name>_<unix-ts>_<codec>.bin or <name>_<unix-ts>.wav');
}

/** A sync file as its batch is checked: when it starts and how long it lasts, by its name and content; its SHA-256. */
export interface SyncProbe {
  startedAtMs: number;
  durationS: number;
  sha256: string;
}

/** What a batch needs of a file before it is queued: parseSyncFile (which does not decode) and the content's hash. */
export function probeSyncFile(bytes: Uint8Array, filename: string, nowMs: number): SyncProbe {
  const { startedAtMs, durationS } = parseSyncFile(bytes, filename, nowMs);
  return { startedAtMs, durationS, sha256: createHash('sha256').update(bytes).digest('hex') };
}
