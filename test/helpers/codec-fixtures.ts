// Test fixtures made at test time: espeak-ng speech, converted by sox, encoded by the real encoders.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { splitAdts } from '../../native/adts.js';
import { OpusEncoderStream } from '../../native/opus.js';

const SENTENCE = 'The quick brown fox jumps over the lazy dog. Wearables stream audio to the server.';

/** Speech as mono s16le at `rate`, made in `dir`: about five seconds of the default sentence, or `text`. */
export function speech(dir: string, rate: number, text = SENTENCE): Int16Array {
  const wav = path.join(dir, 'speech.wav');
  const raw = path.join(dir, `speech-${rate}.raw`);
  execFileSync('espeak-ng', ['-w', wav, text]);
  execFileSync('sox', [wav, '-r', String(rate), '-c', '1', '-b', '16', '-e', 'signed-integer', '-t', 'raw', raw]);
  const b = readFileSync(raw);
  return new Int16Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength));
}

/** Writes `pcm` as a 16-bit mono WAV for the command-line encoders. */
export function writeWav(dir: string, name: string, pcm: Int16Array, rate: number): string {
  const raw = path.join(dir, `${name}.raw`);
  const wav = path.join(dir, `${name}.wav`);
  execFileSync('sh', ['-c', 'cat > "$0"', raw], { input: new Uint8Array(pcm.buffer, pcm.byteOffset, pcm.byteLength) });
  execFileSync('sox', ['-t', 'raw', '-r', String(rate), '-c', '1', '-b', '16', '-e', 'signed-integer', raw, wav]);
  return wav;
}

/** Encodes with `elc3` (10 ms frames) and parses its file: an 18-byte header, then [u16 length][frame] per frame. */
export function elc3(dir: string, pcm: Int16Array, rate: number, bitrate: number): { file: string; frames: Uint8Array[] } {
  const wav = writeWav(dir, `lc3-in-${rate}`, pcm, rate);
  const file = path.join(dir, `out-${rate}-${bitrate}.lc3`);
  execFileSync('elc3', ['-b', String(bitrate), '-m', '10', wav, file], { stdio: 'ignore' });
  const b = readFileSync(file);
  if (b.readUInt16LE(0) !== 0xcc1c) throw new Error('not an elc3 file');
  const frames: Uint8Array[] = [];
  for (let off = b.readUInt16LE(2); off < b.length; ) {
    const n = b.readUInt16LE(off);
    frames.push(new Uint8Array(b.subarray(off + 2, off + 2 + n)));
    off += 2 + n;
  }
  return { file, frames };
}

/** Decodes an elc3 file with `dlc3` to mono s16le samples. */
export function dlc3(dir: string, file: string): Int16Array {
  const wav = path.join(dir, 'dlc3-out.wav');
  const raw = path.join(dir, 'dlc3-out.raw');
  execFileSync('dlc3', [file, wav], { stdio: 'ignore' });
  execFileSync('sox', [wav, '-t', 'raw', '-b', '16', '-e', 'signed-integer', raw]);
  const b = readFileSync(raw);
  return new Int16Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength));
}

/** Encodes mono PCM with ffmpeg's AAC encoder to ADTS (copied at full level into each of `channels` channels) and splits it into frames. */
export function aacAdts(dir: string, pcm: Int16Array, rate: number, channels = 1): Uint8Array[] {
  const raw = path.join(dir, `aac-in-${rate}.raw`);
  const out = path.join(dir, `out-${rate}-${channels}.aac`);
  execFileSync('sh', ['-c', 'cat > "$0"', raw], { input: new Uint8Array(pcm.buffer, pcm.byteOffset, pcm.byteLength) });
  execFileSync('ffmpeg', ['-hide_banner', '-loglevel', 'error', '-y', '-f', 's16le', '-ar', String(rate), '-ac', '1', '-i', raw, ...(channels === 2 ? ['-af', 'pan=stereo|c0=c0|c1=c0'] : []), '-c:a', 'aac', '-b:a', '48k', '-f', 'adts', out]);
  const b = new Uint8Array(readFileSync(out));
  const frames = splitAdts(b);
  if (frames === null) throw new Error('ffmpeg wrote something that is not ADTS');
  return frames.map((f) => b.slice(f.offset, f.offset + f.length));
}

/** Cuts PCM into frames of `n` samples (the last zero-padded). */
export function frames(pcm: Int16Array, n: number): Int16Array[] {
  const out: Int16Array[] = [];
  for (let i = 0; i < pcm.length; i += n) {
    const f = new Int16Array(n);
    f.set(pcm.subarray(i, Math.min(pcm.length, i + n)));
    out.push(f);
  }
  return out;
}

/** Bytes of PCM as s16le messages of `samples` samples each. */
export function pcmMessages(pcm: Int16Array, samples: number): Uint8Array[] {
  const out: Uint8Array[] = [];
  for (let i = 0; i < pcm.length; i += samples) out.push(new Uint8Array(pcm.slice(i, Math.min(pcm.length, i + samples)).buffer));
  return out;
}

/** Concatenates Int16 chunks. */
export function concat(chunks: readonly Int16Array[]): Int16Array {
  const out = new Int16Array(chunks.reduce((n, c) => n + c.length, 0));
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.length;
  }
  return out;
}

/** Prefixes a message with a channel-id byte. */
export function onChannel(id: 1 | 2, m: Uint8Array): Uint8Array {
  const out = new Uint8Array(m.length + 1);
  out[0] = id;
  out.set(m, 1);
  return out;
}

/** Amplitude and frequency of a tone: RMS·√2 and zero crossings per second. */
export function tone(pcm: Int16Array, rate: number): { amplitude: number; hz: number } {
  let sum = 0;
  let crossings = 0;
  for (let i = 0; i < pcm.length; i++) {
    sum += pcm[i]! * pcm[i]!;
    if (i > 0 && pcm[i - 1]! < 0 && pcm[i]! >= 0) crossings++;
  }
  return { amplitude: Math.sqrt(sum / pcm.length) * Math.SQRT2, hz: (crossings * rate) / pcm.length };
}

export function sine(hz: number, rate: number, seconds: number, amplitude: number): Int16Array {
  const n = Math.round(rate * seconds);
  const out = new Int16Array(n);
  for (let i = 0; i < n; i++) out[i] = Math.round(amplitude * Math.sin((2 * Math.PI * hz * i) / rate));
  return out;
}

/** Minimal shape of engine/codec/stream.ts's CodecStream the helpers need (kept structural to avoid a cycle). */
interface StreamLike {
  push(m: Uint8Array): void;
  close(): Promise<void>;
  on(event: 'pcm', fn: (pcm: Int16Array[], info: { corruptFrames: number }) => void): unknown;
  once(event: 'pcm', fn: () => void): unknown;
}

/**
 * Streams `messages` and collects the PCM per channel. `batch` = how many messages to push before waiting for the
 * next answer (Infinity: push everything at once, so they coalesce; 1: one message per task).
 */
export async function drive(stream: StreamLike, messages: readonly Uint8Array[], batch = Infinity): Promise<Int16Array[]> {
  const out: Int16Array[][] = [];
  stream.on('pcm', (pcm) => pcm.forEach((p, i) => (out[i] ??= []).push(p.slice()))); // views valid only during the call
  for (let i = 0; i < messages.length; ) {
    const end = Math.min(messages.length, i + batch);
    const answered = new Promise<void>((resolve) => stream.once('pcm', resolve));
    for (; i < end; i++) stream.push(messages[i]!.slice());
    if (i < messages.length) await answered;
  }
  await stream.close();
  return out.map(concat);
}

/** A `.bin` file as devices write it: 16 kHz `pcm` as Opus packets of `frameSamples`, each behind its 4-byte little-endian length. */
export function opusBinFile(pcm: Int16Array, frameSamples = 320): Buffer {
  const enc = new OpusEncoderStream(16000);
  const parts: Buffer[] = [];
  for (let at = 0; at + frameSamples <= pcm.length; at += frameSamples) {
    const packet = enc.encode(pcm.subarray(at, at + frameSamples));
    const len = Buffer.alloc(4);
    len.writeUInt32LE(packet.length);
    parts.push(len, Buffer.from(packet));
  }
  return Buffer.concat(parts);
}
