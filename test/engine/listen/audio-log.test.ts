// The audio log's format: records read back as written, and a tail torn by a crash (cut short or damaged) found and cut.
import t, { type Test } from 'tap';
import { appendFileSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { LocalAudioLogStore, RecordType, encodeMark, encodeRecord, parsePart, type AudioLogHeader } from '../../../engine/listen/audio-log.js';

const header: AudioLogHeader = { sessionId: 's1', uid: 'u1', codec: 'opus', sampleRate: 16000, channels: 1, language: 'en', source: 'omi', writer: 'w1', createdAtMs: 1 };
const frame = (n: number): Uint8Array => Uint8Array.from({ length: 40 + (n % 7) }, (_, i) => (n * 31 + i) & 0xff);

async function written(t: Test, frames: number): Promise<{ store: LocalAudioLogStore; file: string }> {
  const store = new LocalAudioLogStore(t.testdir());
  const w = await store.create('s1', 0, header);
  await w.append([encodeMark(0, { kind: 'start', epoch: 0, wallMs: 5 }), ...Array.from({ length: frames }, (_, n) => encodeRecord(RecordType.AUDIO, n * 20, frame(n)))]);
  await w.close();
  return { store, file: path.join(store.dir, 's1', '000000.log') };
}

t.test('records read back in order with their offsets and bytes', async (t) => {
  const { store } = await written(t, 10);
  const p = parsePart((await store.read('s1', 0))!)!;
  t.same(p.header, header);
  t.equal(p.tornBytes, 0);
  t.same(p.records[0], { type: RecordType.MARK, offsetMs: 0, mark: { kind: 'start', epoch: 0, wallMs: 5 } });
  t.same(p.records.slice(1).map((r) => r.offsetMs), Array.from({ length: 10 }, (_, n) => n * 20));
  t.ok(p.records.slice(1).every((r, n) => r.type === RecordType.AUDIO && Buffer.from(r.bytes).equals(Buffer.from(frame(n)))));
  t.same(await store.parts('s1'), [0]);
  await t.rejects(store.create('s1', 0, header), { code: 'EEXIST' }, 'a part has one writer');
});

t.test('a record cut short at any byte is torn: everything before it is kept, the cut removes the rest', async (t) => {
  const { store, file } = await written(t, 5);
  const whole = readFileSync(file);
  const full = parsePart(whole)!;
  const lastStart = whole.length - (20 + frame(4).length);
  for (let cut = lastStart + 1; cut < whole.length; cut++) {
    const p = parsePart(whole.subarray(0, cut))!;
    t.equal(p.records.length, full.records.length - 1, `cut at ${cut}: the torn record is dropped`);
    t.equal(p.validBytes, lastStart);
  }
  writeFileSync(file, whole.subarray(0, whole.length - 3));
  const torn = parsePart((await store.read('s1', 0))!)!;
  t.equal(torn.validBytes, lastStart);
  t.equal(torn.tornBytes, whole.length - 3 - lastStart);
  await store.cutTorn('s1', 0, torn.validBytes);
  t.equal(statSync(file).size, lastStart, 'the file ends at the last whole record');
  // Appending after the cut continues a valid log.
  appendFileSync(file, encodeRecord(RecordType.AUDIO, 80, frame(4)));
  t.same(parsePart(readFileSync(file))!.records.length, full.records.length);
});

t.test('a damaged byte (checksum) ends the log there; a damaged header makes the part unreadable', async (t) => {
  const { file } = await written(t, 5);
  const whole = readFileSync(file);
  // Where the third audio record (frame 2) starts: after frames 2, 3 and 4 counted from the end.
  const third = whole.length - [2, 3, 4].reduce((n, k) => n + 20 + frame(k).length, 0);
  const bad = Buffer.from(whole);
  bad[third + 25] = (bad[third + 25]! ^ 0xff) & 0xff;
  const p = parsePart(bad)!;
  t.same(p.records.map((r) => r.offsetMs), [0, 0, 20], 'the damaged record and those after it are dropped');
  t.equal(p.validBytes, third);
  const head = Buffer.from(whole);
  head[20] = (head[20]! ^ 0x01) & 0xff;
  t.equal(parsePart(head), undefined);
  t.equal(parsePart(whole.subarray(0, 10)), undefined, 'a part cut inside its header');
});
