// A voice-message request to 16 kHz mono PCM and the language asked for: a multipart form of `files` (`.wav`, `.bin`)
// and `language`, or a raw linear16 body described by the query.
import { Outcome } from '../protocol.js';
import { AudioInputError, decodeFile, joinPcm, linear16, toMono16k } from './audio.js';
import { MultipartError, boundaryOf, parseMultipart } from './multipart.js';
import { VoiceFailure } from './outcome.js';

/** The query of either form (raw uploads describe their audio in it). */
export interface VoiceQuery {
  language?: string;
  encoding?: string;
  sample_rate?: string;
  channels?: string;
}

export interface VoiceUpload {
  pcm: Int16Array;
  /** As the client sent it (form field, else query); undefined when it sent none. */
  language: string | undefined;
}

const invalid = (message: string): VoiceFailure => new VoiceFailure(Outcome.INVALID_INPUT, undefined, message);

/** A whole number in [min, max] from the query, `fallback` when absent. */
function queryInt(value: string | undefined, name: string, fallback: number, min: number, max: number): number {
  if (value === undefined || value === '') return fallback;
  const n = /^\d{1,6}$/.test(value) ? Number(value) : Number.NaN;
  if (!(n >= min && n <= max)) throw invalid(`${name} must be a whole number from ${min} to ${max}`);
  return n;
}

/**
 * Decodes a request body by its Content-Type. Throws VoiceFailure (invalid_input) with a message naming the rule it
 * broke: an empty body, an unknown type, a malformed form, no `files`, a file that cannot be decoded.
 */
export function readVoiceUpload(contentType: string | undefined, query: VoiceQuery, body: Uint8Array | undefined, nowMs: number): VoiceUpload {
  if (body === undefined || body.byteLength === 0) throw invalid('The request body is empty.');
  const type = contentType?.split(';')[0]?.trim().toLowerCase();
  try {
    if (type === 'application/octet-stream') {
      if ((query.encoding ?? 'linear16') !== 'linear16') throw invalid('encoding must be linear16');
      const rate = queryInt(query.sample_rate, 'sample_rate', 16000, 8000, 48000);
      const channels = queryInt(query.channels, 'channels', 1, 1, 2);
      return { pcm: toMono16k(linear16(body, rate, channels)), language: query.language };
    }
    if (type === 'multipart/form-data') {
      const boundary = boundaryOf(contentType);
      if (boundary === undefined) throw invalid('A multipart/form-data body needs a boundary.');
      const parts = parseMultipart(body, boundary);
      const files = parts.filter((p) => p.name === 'files');
      if (files.length === 0) throw invalid('No files provided.');
      const decoded = files.map((f) => {
        if (f.filename === undefined) throw invalid('Each of files must be a file with a name.');
        return decodeFile(f.data, f.filename, nowMs);
      });
      const language = parts.find((p) => p.name === 'language' && p.filename === undefined);
      return { pcm: joinPcm(decoded), language: language === undefined ? query.language : Buffer.from(language.data).toString('utf8') };
    }
  } catch (err) {
    if (err instanceof AudioInputError || err instanceof MultipartError) throw invalid(err.reason);
    throw err;
  }
  throw invalid('Content-Type must be multipart/form-data or application/octet-stream.');
}
