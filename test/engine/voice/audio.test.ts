// Uploaded audio to 16 kHz mono: WAV files sox writes in every supported sample format, devices' `.bin` Opus files
// encoded by the real encoder, raw linear16; and the rules each breaks with a clear AudioInputError.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { AudioInputError, DEFAULT_FRAME_SAMPLES, MAX_AUDIO_S, decodeFile, decodeOpusBin, joinPcm, linear16, parseOpusBin, parseWav, toMono16k } from '../../../engine/voice/audio.js';
import { OpusEncoderStream } from '../../../native/opus.js';
import { sine, tone, writeWav } from '../../helpers/codec-fixtures.js';

const NOW_MS = Date.UTC(2026, 10, 23, 12);
const TS = Math.floor(NOW_MS / 1000) - 3600;

function bin(packets: Uint8Array[]): Buffer {
  return Buffer.concat(packets.flatMap((p) => {
    const len = Buffer.alloc(4);
    len.writeUInt32LE(p.length);
    return [len, Buffer.from(p)];
  }));
}

function opusPackets(pcm: Int16Array, frame: number): Uint8Array[] {
  const enc = new OpusEncoderStream(16000);
  const out: Uint8Array[] = [];
  for (let at = 0; at + frame <= pcm.length; at += frame) out.push(enc.encode(pcm.subarray(at, at + frame)));
  return out;
}

t.test('WAV files of every supported sample format decode to the same 16 kHz tone', async (t) => {
  const dir = t.testdir();
  const src = writeWav(dir, 'src', sine(440, 16000, 1, 8000), 16000);
  const variants: [string, string[]][] = [
    ['16-bit 16 kHz mono', ['-b', '16']],
    ['8-bit unsigned', ['-b', '8', '-e', 'unsigned-integer']],
    ['24-bit', ['-b', '24']],
    ['32-bit integer', ['-b', '32', '-e', 'signed-integer']],
    ['32-bit float', ['-b', '32', '-e', 'floating-point']],
    ['44.1 kHz stereo', ['-r', '44100', '-c', '2']],
    ['8 kHz', ['-r', '8000']],
  ];
  for (const [what, args] of variants) {
    const file = path.join(dir, `${what.replace(/\W/g, '')}.wav`);
    execFileSync('sox', [src, ...args, file]);
    const pcm = decodeFile(readFileSync(file), 'note.wav', NOW_MS);
    t.ok(Math.abs(pcm.length - 16000) <= 2, `${what}: one second (${pcm.length} samples)`);
    const { hz, amplitude } = tone(pcm.subarray(2000, 14000), 16000);
    t.ok(Math.abs(hz - 440) < 5 && amplitude > 6000, `${what}: 440 Hz at its level (${hz.toFixed(1)} Hz, ${amplitude.toFixed(0)})`);
  }
});

t.test('WAV files the route cannot take are refused with a reason', async (t) => {
  const dir = t.testdir();
  const src = writeWav(dir, 'src', sine(440, 16000, 0.2, 8000), 16000);
  const alaw = path.join(dir, 'alaw.wav');
  execFileSync('sox', [src, '-e', 'a-law', alaw]);
  const wide = path.join(dir, 'wide.wav');
  execFileSync('sox', [src, '-r', '96000', wide]);
  const quad = path.join(dir, 'quad.wav');
  execFileSync('sox', [src, '-c', '4', quad]);
  for (const [what, bytes] of [['A-law', readFileSync(alaw)], ['96 kHz', readFileSync(wide)], ['four channels', readFileSync(quad)], ['not RIFF', Buffer.from('ID3\x03 mp3 data here')]] as const) {
    t.throws(() => parseWav(bytes), AudioInputError, what);
  }
});

t.test('a .bin of real Opus packets decodes frame for frame, at its _fs<N> frame size or the default', async (t) => {
  const pcm = sine(300, 16000, 2, 8000);
  for (const frame of [160, 320, 960]) {
    const name = frame === DEFAULT_FRAME_SAMPLES ? `rec_${TS}.bin` : `rec_${TS}_fs${frame}.bin`;
    const parsed = parseOpusBin(bin(opusPackets(pcm, frame)), name, NOW_MS);
    t.equal(parsed.frameSamples, frame);
    t.equal(parsed.startedAtS, TS);
    const out = decodeOpusBin(parsed);
    t.equal(out.length, Math.floor(pcm.length / frame) * frame, `fs${frame}: every packet's samples`);
    const { hz } = tone(out.subarray(4000, 28000), 16000);
    t.ok(Math.abs(hz - 300) < 5, `fs${frame}: the tone survives (${hz.toFixed(1)} Hz)`);
  }
});

t.test('a corrupt packet in a .bin is concealed with one frame, as a live session skips it', async (t) => {
  const packets = opusPackets(sine(300, 16000, 1, 8000), 320);
  packets.splice(10, 0, new Uint8Array([0xff, 0xff, 0xff]));
  const out = decodeOpusBin(parseOpusBin(bin(packets), `rec_${TS}_fs320.bin`, NOW_MS));
  t.equal(out.length, packets.length * 320);
});

t.test('.bin rules: name, timestamp, frame size, lengths, something decodable', async (t) => {
  const good = bin(opusPackets(sine(300, 16000, 0.2, 8000), 160));
  const cases: [string, Buffer, string][] = [
    ['no timestamp', good, 'rec.bin'],
    ['a timestamp before 2024', good, 'rec_1600000000.bin'],
    ['a timestamp from tomorrow', good, `rec_${TS + 2 * 86400}.bin`],
    ['a frame size Opus does not have', good, `rec_${TS}_fs100.bin`],
    ['a length prefix cut short', Buffer.concat([good, Buffer.from([1, 0])]), `rec_${TS}.bin`],
    ['a length past the end', Buffer.concat([good, Buffer.from([50, 0, 0, 0, 1])]), `rec_${TS}.bin`],
    ['a zero length', Buffer.from([0, 0, 0, 0]), `rec_${TS}.bin`],
    ['no packets', Buffer.alloc(0), `rec_${TS}.bin`],
    ['nothing decodable', bin([new Uint8Array([0xff, 0xff, 0xff]), new Uint8Array([0xff, 0xff])]), `rec_${TS}.bin`],
  ];
  for (const [what, bytes, name] of cases) t.throws(() => decodeFile(bytes, name, NOW_MS), AudioInputError, what);
  t.throws(() => decodeFile(good, 'rec.mp3', NOW_MS), AudioInputError, 'another extension');
});

t.test('raw linear16 and the length bound', async (t) => {
  const stereo = new Int16Array([100, 300, -100, -300]);
  t.same(toMono16k(linear16(new Uint8Array(stereo.buffer), 16000, 2)), new Int16Array([200, -200]), 'channels averaged');
  t.throws(() => linear16(new Uint8Array(3), 16000, 1), AudioInputError, 'half a sample');
  t.throws(() => linear16(new Uint8Array(4), 16000, 3), AudioInputError, 'three channels');
  t.throws(() => linear16(new Uint8Array(2 * 8000 * (MAX_AUDIO_S + 1)), 8000, 1), AudioInputError, `more than ${MAX_AUDIO_S} s`);
  t.throws(() => joinPcm([new Int16Array(16000 * MAX_AUDIO_S), new Int16Array(16000)]), AudioInputError, 'files that add up to too much');
});
