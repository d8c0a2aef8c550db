// WAV files of 16-bit PCM: reading an upload strictly (every chunk walked, sizes checked) and writing stored audio back.

/** What an upload's WAV file holds; `pcm` is its samples, channels interleaved. */
export interface Wav {
  sampleRate: number;
  channels: number;
  bitsPerSample: number;
  /** 1 for integer PCM (or WAVE_FORMAT_EXTENSIBLE with a PCM sub-format), 3 for float, others as found. */
  format: number;
  /** The data chunk's bytes, little-endian. */
  data: Uint8Array;
}

/** A file that is not a readable WAV; the message is safe to show. */
export class WavError extends Error {
  override readonly name = 'WavError';
}

const FORMAT_PCM = 1;
const FORMAT_EXTENSIBLE = 0xfffe;
const HEADER_BYTES = 44;

const tag = (b: Uint8Array, at: number): string => String.fromCharCode(b[at]!, b[at + 1]!, b[at + 2]!, b[at + 3]!);

/** Parses a RIFF/WAVE file; throws WavError when it is not one or its chunks do not add up. */
export function parseWav(bytes: Uint8Array): Wav {
  if (bytes.length < 12 || tag(bytes, 0) !== 'RIFF' || tag(bytes, 8) !== 'WAVE') throw new WavError('not a WAV file');
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let at = 12;
  let fmt: Omit<Wav, 'data'> | undefined;
  while (at + 8 <= bytes.length) {
    const id = tag(bytes, at);
    let size = view.getUint32(at + 4, true);
    const body = at + 8;
    if (id === 'data') {
      if (fmt === undefined) throw new WavError('WAV data comes before its format');
      // Streaming writers leave the size at 0 or 0xFFFFFFFF: the data runs to the end of the file.
      if (size === 0 || size === 0xffffffff) size = bytes.length - body;
      else if (body + size > bytes.length) throw new WavError('WAV data is cut short');
      return { ...fmt, data: bytes.subarray(body, body + size) };
    }
    if (body + size > bytes.length) throw new WavError(`WAV ${id.trim() || 'chunk'} chunk is cut short`);
    if (id === 'fmt ') {
      if (size < 16) throw new WavError('WAV format chunk is too short');
      let format = view.getUint16(body, true);
      if (format === FORMAT_EXTENSIBLE && size >= 40) format = view.getUint16(body + 24, true);
      fmt = { format, channels: view.getUint16(body + 2, true), sampleRate: view.getUint32(body + 4, true), bitsPerSample: view.getUint16(body + 14, true) };
    }
    // Chunks are padded to an even length.
    at = body + size + (size & 1);
  }
  throw new WavError('WAV file has no data chunk');
}

/** Whether the file is 16-bit integer PCM, mono, at `sampleRate`. */
export function isPcm16Mono(w: Wav, sampleRate: number): boolean {
  return w.format === FORMAT_PCM && w.bitsPerSample === 16 && w.channels === 1 && w.sampleRate === sampleRate;
}

/** The samples of a 16-bit file as a fresh aligned array (an odd trailing byte is dropped). */
export function samplesOf(w: Wav): Int16Array {
  const out = new Int16Array(w.data.length >> 1);
  new Uint8Array(out.buffer).set(w.data.subarray(0, out.length * 2));
  return out;
}

/** A 44-byte-header WAV of mono 16-bit PCM. */
export function encodeWav(pcm: Int16Array, sampleRate: number): Buffer {
  const out = Buffer.alloc(HEADER_BYTES + pcm.byteLength);
  out.write('RIFF', 0, 'ascii');
  out.writeUInt32LE(36 + pcm.byteLength, 4);
  out.write('WAVEfmt ', 8, 'ascii');
  out.writeUInt32LE(16, 16);
  out.writeUInt16LE(FORMAT_PCM, 20);
  out.writeUInt16LE(1, 22);
  out.writeUInt32LE(sampleRate, 24);
  out.writeUInt32LE(sampleRate * 2, 28);
  out.writeUInt16LE(2, 32);
  out.writeUInt16LE(16, 34);
  out.write('data', 36, 'ascii');
  out.writeUInt32LE(pcm.byteLength, 40);
  Buffer.from(pcm.buffer, pcm.byteOffset, pcm.byteLength).copy(out, HEADER_BYTES);
  return out;
}
