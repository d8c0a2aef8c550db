// A strict multipart/form-data reader for uploads that arrive whole (the adapter has bounded and read the body): the
// parts with their names, file names, types and bytes, views into the body without copies.

export interface FormPart {
  name: string;
  filename: string | undefined;
  contentType: string | undefined;
  data: Buffer;
}

/** A body that is not the multipart form its Content-Type says; the message is safe to show. */
export class MultipartError extends Error {
  override readonly name = 'MultipartError';
}

/** Parts one form may have: more is not an upload any client of ours sends. */
const MAX_PARTS = 32;
/** Bytes of one part's headers. */
const MAX_HEADER_BYTES = 8192;

/** The boundary of a `multipart/form-data` Content-Type, or undefined when the type is another. */
export function formBoundary(contentType: string | undefined): string | undefined {
  if (contentType === undefined || !/^multipart\/form-data\s*(;|$)/i.test(contentType.trim())) return undefined;
  const m = /;\s*boundary=(?:"([^"]{1,70})"|([^\s;"]{1,70}))/i.exec(contentType);
  return m?.[1] ?? m?.[2];
}

function parameter(header: string, name: string): string | undefined {
  const m = new RegExp(`;\\s*${name}="((?:[^"\\\\]|\\\\.)*)"|;\\s*${name}=([^;\\s]+)`, 'i').exec(header);
  if (m === null) return undefined;
  return m[1] !== undefined ? m[1].replace(/\\(.)/g, '$1') : m[2];
}

/** Reads every part of `body`; throws MultipartError unless it is a well-formed form ending in its close delimiter. */
export function parseMultipart(body: Buffer, boundary: string): FormPart[] {
  const delimiter = Buffer.from(`--${boundary}`);
  const parts: FormPart[] = [];
  let at = body.indexOf(delimiter);
  // Only a preamble of blank lines is taken; anything else means a wrong boundary.
  if (at < 0 || body.subarray(0, at).toString('latin1').trim() !== '') throw new MultipartError('form data does not start with its boundary');
  for (;;) {
    at += delimiter.length;
    if (body[at] === 0x2d && body[at + 1] === 0x2d) return parts;
    if (body[at] !== 0x0d || body[at + 1] !== 0x0a) throw new MultipartError('form boundary is not followed by a line break');
    at += 2;
    const headerEnd = body.indexOf('\r\n\r\n', at);
    if (headerEnd < 0 || headerEnd - at > MAX_HEADER_BYTES) throw new MultipartError('form part headers are missing or too long');
    const headers = new Map<string, string>();
    for (const line of body.subarray(at, headerEnd).toString('utf8').split('\r\n')) {
      const colon = line.indexOf(':');
      if (colon <= 0) throw new MultipartError('form part header is malformed');
      headers.set(line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim());
    }
    const disposition = headers.get('content-disposition');
    if (disposition === undefined || !/^form-data\s*(;|$)/i.test(disposition)) throw new MultipartError('form part has no form-data Content-Disposition');
    const name = parameter(disposition, 'name');
    if (name === undefined) throw new MultipartError('form part has no name');
    const start = headerEnd + 4;
    const next = body.indexOf(Buffer.concat([Buffer.from('\r\n'), delimiter]), start);
    if (next < 0) throw new MultipartError('form data is cut short (no closing boundary)');
    parts.push({ name, filename: parameter(disposition, 'filename'), contentType: headers.get('content-type'), data: body.subarray(start, next) });
    if (parts.length > MAX_PARTS) throw new MultipartError(`form has more than ${MAX_PARTS} parts`);
    at = next + 2;
  }
}
