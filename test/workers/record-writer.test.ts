// A codec stream's staged records (workers/packing.ts RecordWriter): what a task takes is every message in order, in
// the format the codec thread reads, and a stream's staging memory grows with a burst and is given back after it.
import t from 'tap';
import { readRecords, RecordWriter } from '../../workers/packing.js';

const message = (length: number, fill: number): Uint8Array => new Uint8Array(length).fill(fill);

t.test('streams staged apart land in one task buffer, each message whole and in order', async (t) => {
  const a = new RecordWriter();
  const b = new RecordWriter();
  // Lengths that are not multiples of 4 exercise the padding.
  a.add(7, message(41, 1));
  b.add(9, message(3, 2));
  a.add(7, message(40, 3));
  a.add(7, message(1, 4));
  const out = new Uint8Array(a.byteLength + b.byteLength);
  const mid = a.takeInto(out, 0);
  t.equal(mid, 8 + 44 + 8 + 40 + 8 + 4, 'header and padded bytes per record');
  t.equal(b.takeInto(out, mid), out.byteLength);
  const byKey = readRecords(out);
  t.same(
    byKey.get(7)?.map((m) => [m.length, m[0]]),
    [
      [41, 1],
      [40, 3],
      [1, 4],
    ],
  );
  t.same(byKey.get(9)?.map((m) => [m.length, m[0]]), [[3, 2]]);
  t.equal(a.byteLength, 0, 'a take empties the writer');
  t.equal(a.takeInto(out, 5), 5, 'an empty writer adds nothing');
});

t.test('a burst grows the buffer; once the stream stages little again the memory is given back', async (t) => {
  const w = new RecordWriter(256);
  t.equal(w.capacity, 256);
  for (let i = 0; i < 100; i++) w.add(1, message(640, i));
  t.ok(w.capacity >= 100 * 648, 'grown to hold the burst');
  const burst = new Uint8Array(w.byteLength);
  w.takeInto(burst, 0);
  t.same(
    readRecords(burst).get(1)?.map((m) => m[0]),
    Array.from({ length: 100 }, (_, i) => i),
    'nothing lost while growing',
  );
  const grown = w.capacity;
  // The next take holds one message: the buffer goes back to its first size.
  w.add(1, message(40, 0));
  w.takeInto(new Uint8Array(48), 0);
  t.ok(w.capacity < grown, `given back (${grown} → ${w.capacity} bytes)`);
  t.equal(w.capacity, 256);
  // A stream that always stages about as much as its buffer holds keeps it (no reallocation per task).
  const steady = new RecordWriter(256);
  for (let round = 0; round < 3; round++) {
    for (let i = 0; i < 5; i++) steady.add(1, message(640, i));
    steady.takeInto(new Uint8Array(steady.byteLength), 0);
  }
  t.equal(steady.capacity, 4096);
});

t.test('clear drops the staged records', async (t) => {
  const w = new RecordWriter();
  w.add(3, message(10, 1));
  w.clear();
  t.equal(w.byteLength, 0);
  w.add(3, message(2, 9));
  const out = new Uint8Array(w.byteLength);
  w.takeInto(out, 0);
  t.same(readRecords(out).get(3)?.map((m) => m[0]), [9]);
});
