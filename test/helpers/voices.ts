// Distinct test voices: espeak-ng voices (en-us+m3, en-us+f2, …) rendered to 16 kHz mono s16le, and WAV/multipart
// bodies for uploading them.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { encodeWav } from '../../engine/audio/wav.js';

export const SENTENCES = [
  'The quick brown fox jumps over the lazy dog near the river bank.',
  'I would like to schedule a meeting for tomorrow afternoon at three.',
  'Please remember to buy milk, bread and some fresh vegetables today.',
  'The weather has been unusually warm for this time of the year.',
  'We talked about the project budget and the new hiring plan.',
];

/** 16 kHz mono Int16 PCM of `text` in espeak-ng voice `voice`, rendered in `dir`. */
export function voice(dir: string, name: string, voiceName: string, text: string): Int16Array {
  const wav = path.join(dir, `${name}.wav`);
  const raw = path.join(dir, `${name}.raw`);
  execFileSync('espeak-ng', ['-v', voiceName, '-w', wav, text]);
  execFileSync('sox', [wav, '-r', '16000', '-c', '1', '-b', '16', '-e', 'signed-integer', '-t', 'raw', raw]);
  const b = readFileSync(raw);
  return new Int16Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength));
}

/** A multipart/form-data body with one file part, and its Content-Type. */
export function formFile(field: string, filename: string, bytes: Uint8Array, type = 'audio/wav'): { body: Buffer; contentType: string } {
  const boundary = `----test${Math.random().toString(16).slice(2)}`;
  const head = `--${boundary}\r\nContent-Disposition: form-data; name="${field}"; filename="${filename}"\r\nContent-Type: ${type}\r\n\r\n`;
  return { body: Buffer.concat([Buffer.from(head), bytes, Buffer.from(`\r\n--${boundary}--\r\n`)]), contentType: `multipart/form-data; boundary=${boundary}` };
}

/** A WAV upload of 16 kHz PCM as a form's `file`. */
export const wavForm = (pcm: Int16Array, sampleRate = 16000): { body: Buffer; contentType: string } => formFile('file', 'profile.wav', encodeWav(pcm, sampleRate));
