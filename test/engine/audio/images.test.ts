// ImageAssembler: image_chunk validation, out-of-order assembly, and the count, size and TTL limits.
import t from 'tap';
import { ImageAssembler, IMAGE_CHUNK_ERROR, type ImageChunkResult } from '../../../engine/audio/images.js';
import { ManualClock } from '../../../engine/clock.js';

function chunk(id: string, index: number, total: number, bytes: Buffer | string): Record<string, unknown> {
  const data = typeof bytes === 'string' ? bytes : bytes.toString('base64');
  return { type: 'image_chunk', id, index, total, data };
}

function code(r: ImageChunkResult): string | undefined {
  return r.status === 'rejected' ? r.code : undefined;
}

const ok = Buffer.from('abc').toString('base64');

const invalid: [string, unknown, string, string | undefined][] = [
  ['not an object', 'x', IMAGE_CHUNK_ERROR.NOT_A_MESSAGE, 'type'],
  ['wrong type', { ...chunk('a', 0, 1, ok), type: 'speaker_assigned' }, IMAGE_CHUNK_ERROR.NOT_A_MESSAGE, 'type'],
  ['id missing', { ...chunk('a', 0, 1, ok), id: undefined }, IMAGE_CHUNK_ERROR.FIELD_INVALID, 'id'],
  ['id empty', chunk('', 0, 1, ok), IMAGE_CHUNK_ERROR.FIELD_INVALID, 'id'],
  ['id of 129 chars', chunk('x'.repeat(129), 0, 1, ok), IMAGE_CHUNK_ERROR.FIELD_INVALID, 'id'],
  ['total 0', chunk('a', 0, 0, ok), IMAGE_CHUNK_ERROR.FIELD_INVALID, 'total'],
  ['total 1001', chunk('a', 0, 1001, ok), IMAGE_CHUNK_ERROR.FIELD_INVALID, 'total'],
  ['total a string', { ...chunk('a', 0, 1, ok), total: '2' }, IMAGE_CHUNK_ERROR.FIELD_INVALID, 'total'],
  ['index negative', chunk('a', -1, 2, ok), IMAGE_CHUNK_ERROR.FIELD_INVALID, 'index'],
  ['index equal to total', chunk('a', 2, 2, ok), IMAGE_CHUNK_ERROR.FIELD_INVALID, 'index'],
  ['index fractional', chunk('a', 0.5, 2, ok), IMAGE_CHUNK_ERROR.FIELD_INVALID, 'index'],
  ['data empty', chunk('a', 0, 1, ''), IMAGE_CHUNK_ERROR.FIELD_INVALID, 'data'],
  ['data not a string', { ...chunk('a', 0, 1, ok), data: 12 }, IMAGE_CHUNK_ERROR.FIELD_INVALID, 'data'],
  ['data with a bad character', chunk('a', 0, 1, 'YW*j'), IMAGE_CHUNK_ERROR.FIELD_INVALID, 'data'],
  ['data missing padding', chunk('a', 0, 1, 'YWJ'), IMAGE_CHUNK_ERROR.FIELD_INVALID, 'data'],
  ['data padding in the middle', chunk('a', 0, 1, 'YQ==YWJj'), IMAGE_CHUNK_ERROR.FIELD_INVALID, 'data'],
  ['data url-safe alphabet', chunk('a', 0, 1, 'ab-_'), IMAGE_CHUNK_ERROR.FIELD_INVALID, 'data'],
  ['data with whitespace', chunk('a', 0, 1, 'YWJj\n'), IMAGE_CHUNK_ERROR.FIELD_INVALID, 'data'],
];

for (const [name, raw, c, field] of invalid) {
  t.test(`refused: ${name}`, async (t) => {
    const a = new ImageAssembler(new ManualClock());
    t.same(a.add(raw), { status: 'rejected', code: c, field });
    t.equal(a.pendingCount, 0);
  });
}

t.test('an id of exactly 128 chars and a 1000-chunk total are accepted', async (t) => {
  const a = new ImageAssembler(new ManualClock());
  t.equal(a.add(chunk('x'.repeat(128), 0, 1, ok)).status, 'complete');
  t.equal(a.add(chunk('big', 999, 1000, ok)).status, 'pending');
});

t.test('a single-chunk image completes at once', async (t) => {
  const a = new ImageAssembler(new ManualClock());
  t.same(a.add(chunk('one', 0, 1, Buffer.from('jpeg'))), { status: 'complete', image: { id: 'one', bytes: Buffer.from('jpeg') } });
  t.equal(a.pendingCount, 0);
});

t.test('chunks assemble in index order whatever order they arrive in; duplicates are ignored', async (t) => {
  const a = new ImageAssembler(new ManualClock());
  const parts = [Buffer.from('AAA'), Buffer.from('BBBB'), Buffer.from('C')];
  t.same(a.add(chunk('img', 2, 3, parts[2]!)), { status: 'pending', id: 'img', received: 1, total: 3, duplicate: false });
  t.same(a.add(chunk('img', 0, 3, parts[0]!)), { status: 'pending', id: 'img', received: 2, total: 3, duplicate: false });
  t.same(a.add(chunk('img', 0, 3, Buffer.from('ZZZ'))), { status: 'pending', id: 'img', received: 2, total: 3, duplicate: true });
  const r = a.add(chunk('img', 1, 3, parts[1]!));
  t.equal(r.status, 'complete');
  if (r.status === 'complete') t.same(r.image.bytes, Buffer.from('AAABBBBC'), 'first copy of a duplicate wins');
  t.equal(a.pendingCount, 0);
});

t.test('a chunk disagreeing on total is rejected and the image kept', async (t) => {
  const a = new ImageAssembler(new ManualClock());
  a.add(chunk('img', 0, 2, ok));
  t.equal(code(a.add(chunk('img', 1, 3, ok))), IMAGE_CHUNK_ERROR.TOTAL_MISMATCH);
  t.equal(a.add(chunk('img', 1, 2, ok)).status, 'complete');
});

t.test('images of a session assemble independently', async (t) => {
  const a = new ImageAssembler(new ManualClock());
  a.add(chunk('a', 0, 2, Buffer.from('a0')));
  a.add(chunk('b', 0, 2, Buffer.from('b0')));
  const rb = a.add(chunk('b', 1, 2, Buffer.from('b1')));
  t.same(rb.status === 'complete' ? rb.image.bytes.toString() : null, 'b0b1');
  t.equal(a.pendingCount, 1);
});

t.test('at most 50 pending images: the 51st is rejected', async (t) => {
  const a = new ImageAssembler(new ManualClock());
  for (let i = 0; i < 50; i++) t.equal(a.add(chunk(`img-${i}`, 0, 2, ok)).status, 'pending');
  t.same(a.add(chunk('img-50', 0, 2, ok)), { status: 'rejected', code: IMAGE_CHUNK_ERROR.TOO_MANY_PENDING });
  t.equal(a.add(chunk('img-0', 1, 2, ok)).status, 'complete', 'chunks of pending images still land');
  t.equal(a.add(chunk('img-50', 0, 2, ok)).status, 'pending', 'room again once one completes');
});

t.test('a full assembler makes room by dropping expired images', async (t) => {
  const clock = new ManualClock();
  const a = new ImageAssembler(clock, { maxPendingImages: 2 });
  a.add(chunk('old', 0, 2, ok));
  clock.advance(30_000);
  a.add(chunk('newer', 0, 2, ok));
  clock.advance(30_000);
  t.equal(a.add(chunk('third', 0, 2, ok)).status, 'pending', '"old" expired at 60 s and was swept');
  t.equal(a.pendingCount, 2);
});

t.test('TTL: sweep drops images 60 s after their first chunk', async (t) => {
  const clock = new ManualClock();
  const a = new ImageAssembler(clock);
  a.add(chunk('slow', 0, 2, ok));
  clock.advance(59_999);
  t.same(a.sweep(), []);
  a.add(chunk('fresh', 0, 2, ok));
  clock.advance(1);
  t.same(a.sweep(), ['slow']);
  t.equal(a.pendingCount, 1);
});

t.test('TTL: a late chunk of an expired image starts it over', async (t) => {
  const clock = new ManualClock();
  const a = new ImageAssembler(clock, { ttlMs: 1000 });
  a.add(chunk('img', 0, 2, Buffer.from('x')));
  clock.advance(1000);
  t.same(a.add(chunk('img', 1, 2, Buffer.from('y'))), { status: 'pending', id: 'img', received: 1, total: 2, duplicate: false });
});

t.test('size cap: an image over the cap is dropped', async (t) => {
  const a = new ImageAssembler(new ManualClock(), { maxImageBytes: 10 });
  t.equal(a.add(chunk('img', 0, 3, Buffer.alloc(6))).status, 'pending');
  t.same(a.add(chunk('img', 1, 3, Buffer.alloc(5))), { status: 'rejected', code: IMAGE_CHUNK_ERROR.IMAGE_TOO_LARGE });
  t.equal(a.pendingCount, 0, 'the partial image is gone');
  t.equal(a.add(chunk('exact', 0, 1, Buffer.alloc(10))).status, 'complete', 'exactly the cap is fine');
  t.same(a.add(chunk('huge', 0, 1, Buffer.alloc(30))), { status: 'rejected', code: IMAGE_CHUNK_ERROR.FIELD_INVALID, field: 'data' }, 'a chunk bigger than the cap is refused before decoding');
});

t.test('clear forgets everything', async (t) => {
  const a = new ImageAssembler(new ManualClock());
  a.add(chunk('img', 0, 2, ok));
  a.clear();
  t.equal(a.pendingCount, 0);
});
