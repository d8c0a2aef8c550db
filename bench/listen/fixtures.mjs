// The devices' audio: espeak-ng speech with pauses, encoded once per codec by the real encoders, cached in the temp dir.
// Every simulated device plays the same frames (from its own offset), so the generator never encodes while it runs.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ROOT_DIR } from '../lib/report.mjs';

/** Bump when the speech or the encoding changes, so cached fixtures are remade. */
const FIXTURE_VERSION = 1;

/**
 * The query each codec is opened with, how much audio one message carries, and the frames a stream's decoder keeps
 * for itself (none: every codec's decoder answers each frame with its PCM).
 */
export const CODECS = /** @type {const} */ ({
  pcm8: { sampleRate: 8000, frameMs: 10, primingFrames: 0 },
  pcm16: { sampleRate: 16000, frameMs: 10, primingFrames: 0 },
  opus: { sampleRate: 16000, frameMs: 10, primingFrames: 0 },
  opus_fs320: { sampleRate: 16000, frameMs: 20, primingFrames: 0 },
  aac: { sampleRate: 48000, frameMs: 1024 / 48, primingFrames: 0 },
  lc3: { sampleRate: 48000, frameMs: 10, primingFrames: 0 },
  lc3_fs1030: { sampleRate: 16000, frameMs: 10, primingFrames: 0 },
});
/** @typedef {keyof typeof CODECS} CodecName */

/** Sentences and the pause after each, in seconds: a wearer talking, then listening. */
const SCRIPT = [
  ['Good morning. Remind me to call the dentist about moving my appointment to Thursday.', 1.5],
  ['The quarterly numbers look better than we expected, mostly thanks to the new subscription plan.', 2.5],
  ['Can you pick up oat milk, bread and two lemons on the way home?', 1],
  ['Wearables stream audio to the server, one frame at a time, all day long.', 3],
  ['Let us meet again next week and decide which of the three designs we build first.', 2],
];

/**
 * @typedef {object} Fixture
 * @property {CodecName} codec
 * @property {number} sampleRate the query's sample_rate
 * @property {number} frameMs audio per message, in milliseconds
 * @property {number} primingFrames frames per stream the decoder turns into no PCM (codec delay, not loss)
 * @property {number} seconds length of the loop
 * @property {string} what
 * @property {Buffer[]} frames one message each
 */

/**
 * @param {string} dir
 * @param {Int16Array} pcm 16 kHz
 * @param {number} rate
 */
function resample(dir, pcm, rate) {
  if (rate === 16000) return pcm;
  const src = path.join(dir, 'in-16000.raw');
  const dst = path.join(dir, `out-${rate}.raw`);
  writeFileSync(src, new Uint8Array(pcm.buffer, pcm.byteOffset, pcm.byteLength));
  execFileSync('sox', ['-t', 'raw', '-r', '16000', '-c', '1', '-b', '16', '-e', 'signed-integer', src, '-r', String(rate), '-t', 'raw', dst]);
  const b = readFileSync(dst);
  return new Int16Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength));
}

/**
 * Encodes the script for `codec` with the service's own encoders (dist/native) and ffmpeg for AAC.
 * @param {CodecName} codec
 * @param {string} dir scratch directory
 * @returns {Promise<Buffer[]>}
 */
async function encode(codec, dir) {
  const { speak, silence, concat } = await import(path.join(ROOT_DIR, 'dist/test/helpers/speech.js'));
  const fx = await import(path.join(ROOT_DIR, 'dist/test/helpers/codec-fixtures.js'));
  /** @type {Int16Array} */
  const pcm16 = concat(...SCRIPT.flatMap(([text, pause], i) => [speak(dir, String(text), `s${i}`), silence(Number(pause))]));
  const rate = CODECS[codec].sampleRate;
  const pcm = resample(dir, pcm16, rate);
  const samples = Math.round((rate * CODECS[codec].frameMs) / 1000);
  /** @type {Uint8Array[]} */
  let frames;
  switch (codec) {
    case 'pcm8':
    case 'pcm16':
      frames = fx.pcmMessages(pcm, samples);
      break;
    case 'opus':
    case 'opus_fs320': {
      const { OpusEncoderStream } = await import(path.join(ROOT_DIR, 'dist/native/opus.js'));
      const enc = new OpusEncoderStream(rate);
      frames = fx.frames(pcm, samples).map((/** @type {Int16Array} */ f) => enc.encode(f));
      break;
    }
    case 'lc3':
    case 'lc3_fs1030': {
      const { Lc3Encoder } = await import(path.join(ROOT_DIR, 'dist/native/index.js'));
      const enc = new Lc3Encoder(10000, rate);
      frames = fx.frames(pcm, samples).map((/** @type {Int16Array} */ f) => enc.encode(f, codec === 'lc3' ? 100 : 30));
      break;
    }
    case 'aac':
      frames = fx.aacAdts(dir, pcm, rate);
      break;
  }
  return frames.map((f) => Buffer.from(f.buffer, f.byteOffset, f.byteLength));
}

/**
 * The fixture of `codec`, made on first use and cached under the temp dir (a few seconds of espeak-ng, sox and encoders).
 * @param {CodecName} codec
 * @returns {Promise<Fixture & { file: string }>}
 */
export async function loadFixture(codec) {
  if (!(codec in CODECS)) throw new Error(`unknown codec "${codec}"; use one of ${Object.keys(CODECS).join(', ')}`);
  const cacheDir = path.join(tmpdir(), `wearable-bench-fixtures-v${FIXTURE_VERSION}`);
  const file = path.join(cacheDir, `${codec}.json`);
  if (!existsSync(file)) {
    mkdirSync(cacheDir, { recursive: true });
    const dir = mkdtempSync(path.join(tmpdir(), 'bench-fixture-'));
    try {
      const frames = await encode(codec, dir);
      const { sampleRate, frameMs } = CODECS[codec];
      const body = { codec, sampleRate, frameMs, seconds: Math.round(frames.length * frameMs) / 1000, what: `espeak-ng speech, ${SCRIPT.length} sentences with pauses`, frames: frames.map((f) => f.toString('base64')) };
      writeFileSync(`${file}.tmp`, JSON.stringify(body));
      execFileSync('mv', [`${file}.tmp`, file]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }
  return { ...readFixture(file), primingFrames: CODECS[codec].primingFrames, file };
}

/**
 * Reads a fixture file written by loadFixture (the generator processes call this).
 * @param {string} file
 * @returns {Fixture}
 */
export function readFixture(file) {
  const j = JSON.parse(readFileSync(file, 'utf8'));
  return { ...j, primingFrames: CODECS[/** @type {CodecName} */ (j.codec)]?.primingFrames ?? 0, frames: j.frames.map((/** @type {string} */ b) => Buffer.from(b, 'base64')) };
}
