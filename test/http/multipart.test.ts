// The strict multipart/form-data reader: parts with names, file names and bytes as sent; malformed forms refused.
import t from 'tap';
import { MultipartError, formBoundary, parseMultipart } from '../../http/multipart.js';

const CRLF = '\r\n';

t.test('boundaries come from multipart/form-data types only', async (t) => {
  t.equal(formBoundary('multipart/form-data; boundary=abc123'), 'abc123');
  t.equal(formBoundary('Multipart/Form-Data; charset=utf-8; boundary="a b:c"'), 'a b:c');
  t.equal(formBoundary('application/json'), undefined);
  t.equal(formBoundary('multipart/mixed; boundary=x'), undefined);
  t.equal(formBoundary('multipart/form-data'), undefined, 'no boundary');
  t.equal(formBoundary(undefined), undefined);
});

t.test('parts keep their names, file names, types and exact bytes', async (t) => {
  const binary = Buffer.from([0, 13, 10, 45, 45, 255, 13, 10]);
  const body = Buffer.concat([
    Buffer.from(`${CRLF}--xyz${CRLF}Content-Disposition: form-data; name="language"${CRLF}${CRLF}en${CRLF}`),
    Buffer.from(`--xyz${CRLF}Content-Disposition: form-data; name="file"; filename="my \\"voice\\".wav"${CRLF}Content-Type: audio/wav${CRLF}${CRLF}`),
    binary,
    Buffer.from(`${CRLF}--xyz--${CRLF}`),
  ]);
  const parts = parseMultipart(body, 'xyz');
  t.equal(parts.length, 2);
  t.match(parts[0], { name: 'language', filename: undefined, contentType: undefined });
  t.equal(parts[0]!.data.toString(), 'en');
  t.match(parts[1], { name: 'file', filename: 'my "voice".wav', contentType: 'audio/wav' });
  t.same([...parts[1]!.data], [...binary], 'line breaks and dashes inside a part are data');
});

t.test('malformed forms are refused with a reason', async (t) => {
  const part = `--b${CRLF}Content-Disposition: form-data; name="file"${CRLF}${CRLF}data`;
  const cases: [string, string, RegExp][] = [
    ['another boundary', `--other${CRLF}${CRLF}x${CRLF}--other--`, /does not start with its boundary/],
    ['no closing boundary', part, /cut short/],
    ['no disposition', `--b${CRLF}Content-Type: text/plain${CRLF}${CRLF}x${CRLF}--b--`, /no form-data Content-Disposition/],
    ['no name', `--b${CRLF}Content-Disposition: form-data${CRLF}${CRLF}x${CRLF}--b--`, /no name/],
    ['headers never end', `--b${CRLF}Content-Disposition: form-data; name="a"`, /headers are missing/],
    ['garbage after the boundary', `--bX${CRLF}`, /not followed by a line break/],
  ];
  for (const [name, body, reason] of cases) t.throws(() => parseMultipart(Buffer.from(body), 'b'), { name: 'MultipartError', message: reason }, name);
  t.ok(new MultipartError('x') instanceof Error);
  t.same(parseMultipart(Buffer.from(`${part}${CRLF}--b--`), 'b').map((p) => p.data.toString()), ['data']);
});
