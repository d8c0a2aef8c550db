// A small strict multipart/form-data reader (RFC 7578) for uploads already read into memory: parts are views of the body.
//
// Rationale: the upload routes read their bounded body whole (http/adapter.ts), so a streaming parser buys nothing;
// this one refuses anything malformed (no boundary, a part without Content-Disposition, a missing close delimiter)
// rather than guessing, since a guessed part would be audio decoded from the wrong bytes.

/** One part of a form: a field (no filename) or a file. `data` is a view into the body; copy it to keep it beyond the body. */
export interface FormPart {
  readonly name: string;
  readonly filename: string | undefined;
  readonly contentType: string | undefined;
  readonly data: Uint8Array;
}

/** Why a body is not a well-formed form; `reason` is public-safe (it never quotes the body). */
export class MultipartError extends Error {
  constructor(readonly reason: string) {
    super(reason);
    this.name = 'MultipartError';
  }
}

/** Parts one form may hold: beyond it the upload is refused rather than parsed. */
export const MAX_PARTS = 64;
/** Bytes of one part's headers. */
const MAX_HEADER_BYTES = 8 * 1024;

const CRLF = Buffer.from('\r\n');
const HEADER_END = Buffer.from('\r\n\r\n');

/** The boundary of a `multipart/form-data` Content-Type, or undefined when the type is not that or names none. */
export function boundaryOf(contentType: string | undefined): string | undefined {
  if (contentType === undefined) return undefined;
  const [type, ...params] = splitParams(contentType);
  if (type?.toLowerCase() !== 'multipart/form-data') return undefined;
  const b = params.find((p) => p.key === 'boundary')?.value;
  // RFC 2046: 1 to 70 characters, not ending in a space.
  if (b === undefined || b.length < 1 || b.length > 70 || b.endsWith(' ')) return undefined;
  return b;
}

/** Splits a header value into its first token and `key=value` parameters (values unquoted, keys lower-cased). */
function splitParams(value: string): [string | undefined, ...{ key: string; value: string }[]] {
  const out: { key: string; value: string }[] = [];
  let i = value.indexOf(';');
  const first = (i < 0 ? value : value.slice(0, i)).trim();
  while (i >= 0 && i < value.length) {
    i++;
    while (value[i] === ' ' || value[i] === '\t') i++;
    const eq = value.indexOf('=', i);
    if (eq < 0) break;
    const key = value.slice(i, eq).trim().toLowerCase();
    let v = '';
    let j = eq + 1;
    if (value[j] === '"') {
      j++;
      while (j < value.length && value[j] !== '"') {
        if (value[j] === '\\' && j + 1 < value.length) j++;
        v += value[j];
        j++;
      }
      j++;
    } else {
      const end = value.indexOf(';', j);
      v = (end < 0 ? value.slice(j) : value.slice(j, end)).trim();
      j = end < 0 ? value.length : end;
    }
    out.push({ key, value: v });
    const next = value.indexOf(';', j);
    i = next;
  }
  return [first, ...out];
}

/** RFC 5987 `filename*=UTF-8''…`; undefined when it is not in that form. */
function extendedValue(v: string): string | undefined {
  const m = /^utf-8'[^']*'(.*)$/i.exec(v);
  if (!m) return undefined;
  try {
    return decodeURIComponent(m[1]!);
  } catch {
    return undefined;
  }
}

function partHeaders(raw: string): { name: string; filename: string | undefined; contentType: string | undefined } {
  let disposition: string | undefined;
  let contentType: string | undefined;
  for (const line of raw.split('\r\n')) {
    const colon = line.indexOf(':');
    if (colon <= 0) throw new MultipartError('a part header is malformed');
    const key = line.slice(0, colon).trim().toLowerCase();
    const value = line.slice(colon + 1).trim();
    if (key === 'content-disposition') disposition = value;
    else if (key === 'content-type') contentType = value;
  }
  if (disposition === undefined) throw new MultipartError('a part has no Content-Disposition');
  const [kind, ...params] = splitParams(disposition);
  if (kind?.toLowerCase() !== 'form-data') throw new MultipartError('a part is not form-data');
  const name = params.find((p) => p.key === 'name')?.value;
  if (name === undefined) throw new MultipartError('a part has no name');
  const extended = params.find((p) => p.key === 'filename*');
  const filename = (extended && extendedValue(extended.value)) ?? params.find((p) => p.key === 'filename')?.value;
  return { name, filename, contentType };
}

/**
 * The parts of a `multipart/form-data` body with `boundary`, in order. Throws MultipartError when the body is not a
 * complete, well-formed form (a preamble before the first delimiter and an epilogue after the last are allowed).
 */
export function parseMultipart(body: Uint8Array, boundary: string): FormPart[] {
  const buf = Buffer.from(body.buffer, body.byteOffset, body.byteLength);
  const dash = Buffer.from(`--${boundary}`);
  const delimiter = Buffer.from(`\r\n--${boundary}`);
  // The first delimiter may open the body or follow a preamble line.
  let at = buf.subarray(0, dash.length).equals(dash) ? 0 : buf.indexOf(delimiter);
  if (at < 0) throw new MultipartError('the body has no part delimiter');
  at += at === 0 && buf[0] === 0x2d ? dash.length : delimiter.length;
  const parts: FormPart[] = [];
  for (;;) {
    // After a delimiter: `--` closes the form, else optional transport padding then CRLF opens a part.
    if (buf[at] === 0x2d && buf[at + 1] === 0x2d) return parts;
    while (buf[at] === 0x20 || buf[at] === 0x09) at++;
    if (!(buf[at] === 0x0d && buf[at + 1] === 0x0a)) throw new MultipartError('a part delimiter is malformed');
    at += CRLF.length;
    if (parts.length >= MAX_PARTS) throw new MultipartError(`a form holds at most ${MAX_PARTS} parts`);
    const headerEnd = buf.indexOf(HEADER_END, at);
    if (headerEnd < 0 || headerEnd - at > MAX_HEADER_BYTES) throw new MultipartError('a part has no end of headers');
    // Clients send names as UTF-8 bytes (RFC 7578 section 4.2), not as RFC 2047 words.
    const headers = partHeaders(buf.toString('utf8', at, headerEnd));
    const start = headerEnd + HEADER_END.length;
    const end = buf.indexOf(delimiter, start);
    if (end < 0) throw new MultipartError('the form is not closed');
    parts.push({ ...headers, data: body.subarray(start, end) });
    at = end + delimiter.length;
  }
}
