// Test speech: espeak-ng renders a phrase, sox turns it into 16 kHz mono s16le; silence is zeros.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';

/** 16 kHz mono Int16 PCM of `text` spoken by espeak-ng, rendered in `dir`. */
export function speak(dir: string, text: string, name = 'speech'): Int16Array {
  const wav = path.join(dir, `${name}.wav`);
  const raw = path.join(dir, `${name}.raw`);
  execFileSync('espeak-ng', ['-s', '140', '-w', wav, text]);
  execFileSync('sox', [wav, '-r', '16000', '-c', '1', '-b', '16', '-e', 'signed', raw]);
  const b = readFileSync(raw);
  return new Int16Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength));
}

/** `seconds` of digital silence plus a little noise (real microphones are never at zero), at 16 kHz. */
export function silence(seconds: number, noiseAmplitude = 20): Int16Array {
  const out = new Int16Array(Math.round(seconds * 16000));
  let x = 12345;
  for (let i = 0; i < out.length; i++) {
    x = (x * 1103515245 + 12345) & 0x7fffffff;
    out[i] = ((x % (2 * noiseAmplitude + 1)) - noiseAmplitude) | 0;
  }
  return out;
}

export function concat(...parts: Int16Array[]): Int16Array {
  const out = new Int16Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

/** Splits PCM into chunks of `ms` milliseconds, as the decoder stage delivers it. */
export function chunks(pcm: Int16Array, ms = 100): Int16Array[] {
  const n = (16000 * ms) / 1000;
  const out: Int16Array[] = [];
  for (let i = 0; i < pcm.length; i += n) out.push(pcm.slice(i, i + n));
  return out;
}
