// The multipart reader against bodies the platform's own FormData encoder writes, and properties over random forms:
// every part comes back byte for byte, and a damaged body is refused with MultipartError, never misread or thrown past.
import t from 'tap';
import { MAX_PARTS, MultipartError, boundaryOf, parseMultipart } from '../../../engine/voice/multipart.js';

/** A small seeded generator, so a failing case can be run again. */
function rng(seed: number): () => number {
  let x = seed >>> 0 || 1;
  return () => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return (x >>> 0) / 0x100000000;
  };
}

/** Bytes biased towards what confuses a parser: CR, LF, dashes and pieces of the boundary. */
function nastyBytes(next: () => number, boundary: string, length: number): Uint8Array {
  const out = new Uint8Array(length);
  const specials = [0x0d, 0x0a, 0x2d, ...Buffer.from(boundary.slice(0, 4))];
  for (let i = 0; i < length; i++) out[i] = next() < 0.3 ? specials[Math.floor(next() * specials.length)]! : Math.floor(next() * 256);
  return out;
}

/** Encodes a form as a client does (RFC 7578), preamble and epilogue optional. */
function encode(boundary: string, parts: { name: string; filename?: string; data: Uint8Array }[], preamble = '', epilogue = ''): Buffer {
  const chunks: Buffer[] = [Buffer.from(preamble ? `${preamble}\r\n` : '')];
  for (const p of parts) {
    const disposition = `form-data; name="${p.name}"${p.filename === undefined ? '' : `; filename="${p.filename}"`}`;
    chunks.push(Buffer.from(`--${boundary}\r\nContent-Disposition: ${disposition}\r\n${p.filename ? 'Content-Type: application/octet-stream\r\n' : ''}\r\n`), Buffer.from(p.data), Buffer.from('\r\n'));
  }
  chunks.push(Buffer.from(`--${boundary}--${epilogue ? `\r\n${epilogue}` : ''}`));
  return Buffer.concat(chunks);
}

t.test('reads what the platform FormData encoder writes, files and fields, unicode names included', async (t) => {
  const audio = new Uint8Array(5000).map((_, i) => (i * 7919) % 256);
  const f = new FormData();
  f.append('files', new Blob([audio]), 'clip_1735689600_fs320.bin');
  f.append('files', new Blob([Buffer.from('RIFF\r\n--x')]), 'Grüße ✓.wav');
  f.append('language', 'pt-BR');
  const req = new Request('http://x/', { method: 'POST', body: f });
  const boundary = boundaryOf(req.headers.get('content-type')!);
  t.ok(boundary, 'the boundary is found in the content type');
  const parts = parseMultipart(new Uint8Array(await req.arrayBuffer()), boundary!);
  t.same(parts.map((p) => [p.name, p.filename]), [['files', 'clip_1735689600_fs320.bin'], ['files', 'Grüße ✓.wav'], ['language', undefined]]);
  t.same(Buffer.from(parts[0]!.data), Buffer.from(audio));
  t.equal(Buffer.from(parts[1]!.data).toString(), 'RIFF\r\n--x');
  t.equal(Buffer.from(parts[2]!.data).toString(), 'pt-BR');
});

t.test('boundaryOf takes only multipart/form-data with a valid boundary', async (t) => {
  t.equal(boundaryOf('multipart/form-data; boundary="a b:c"'), 'a b:c');
  t.equal(boundaryOf('Multipart/Form-Data;boundary=xyz;charset=utf-8'), 'xyz');
  t.equal(boundaryOf('multipart/mixed; boundary=xyz'), undefined);
  t.equal(boundaryOf('multipart/form-data'), undefined);
  t.equal(boundaryOf(`multipart/form-data; boundary=${'b'.repeat(71)}`), undefined);
  t.equal(boundaryOf(undefined), undefined);
});

t.test('property: any form round-trips, whatever bytes its parts hold', async (t) => {
  for (let seed = 1; seed <= 300; seed++) {
    const next = rng(seed);
    const boundary = `----b${Math.floor(next() * 1e9).toString(36)}`;
    const parts = Array.from({ length: 1 + Math.floor(next() * 5) }, (_, i) => ({
      name: i % 3 === 2 ? 'language' : 'files',
      ...(i % 3 === 2 ? {} : { filename: `f${i}_${seed}.bin` }),
      data: nastyBytes(next, boundary, Math.floor(next() * 600)),
    }));
    // The encoder's one rule: the boundary must not occur in the data after CRLF.
    if (parts.some((p) => Buffer.from(p.data).includes(`\r\n--${boundary}`))) continue;
    const body = encode(boundary, parts, next() < 0.3 ? 'preamble text' : '', next() < 0.3 ? 'epilogue' : '');
    const got = parseMultipart(body, boundary);
    if (got.length !== parts.length || got.some((g, i) => g.name !== parts[i]!.name || g.filename !== parts[i]!.filename || !Buffer.from(g.data).equals(Buffer.from(parts[i]!.data)))) {
      t.fail(`seed ${seed} did not round-trip`);
      return;
    }
  }
  t.pass('300 random forms round-tripped');
});

t.test('property: every truncated form is refused with MultipartError, never misread', async (t) => {
  for (let seed = 1; seed <= 300; seed++) {
    const next = rng(seed * 7);
    const body = encode('bnd', [{ name: 'files', filename: 'a.wav', data: nastyBytes(next, 'zz', 100) }]);
    const cut = body.subarray(0, Math.floor(next() * body.length));
    try {
      parseMultipart(cut, 'bnd');
      t.fail(`seed ${seed}: a form cut at ${cut.length} of ${body.length} bytes was read`);
      return;
    } catch (err) {
      if (!(err instanceof MultipartError)) {
        t.fail(`seed ${seed} threw ${(err as Error).name}`);
        return;
      }
    }
  }
  t.pass('300 truncated forms refused');
});

t.test('the rules a client can break, each a MultipartError', async (t) => {
  const ok = (data: string) => Buffer.from(data);
  const cases: [string, Buffer][] = [
    ['no delimiter', ok('just some bytes')],
    ['no Content-Disposition', ok('--b\r\nContent-Type: text/plain\r\n\r\nx\r\n--b--')],
    ['not form-data', ok('--b\r\nContent-Disposition: attachment; name="files"\r\n\r\nx\r\n--b--')],
    ['no name', ok('--b\r\nContent-Disposition: form-data; filename="a.wav"\r\n\r\nx\r\n--b--')],
    ['not closed', ok('--b\r\nContent-Disposition: form-data; name="files"\r\n\r\nx')],
    ['a malformed header line', ok('--b\r\nContent-Disposition form-data\r\n\r\nx\r\n--b--')],
  ];
  for (const [what, body] of cases) t.throws(() => parseMultipart(body, 'b'), MultipartError, what);
  const many = encode('b', Array.from({ length: MAX_PARTS + 1 }, () => ({ name: 'language', data: new Uint8Array(1) })));
  t.throws(() => parseMultipart(many, 'b'), MultipartError, `more than ${MAX_PARTS} parts`);
  t.same(parseMultipart(ok('--b\r\nContent-Disposition: form-data; name="files"; filename*=UTF-8\'\'%E2%9C%93.wav\r\n\r\nx\r\n--b--'), 'b')[0]!.filename, '✓.wav', 'RFC 5987 file names');
});
