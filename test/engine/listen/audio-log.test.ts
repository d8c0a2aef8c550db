// The audio log's format: a node's segment holds chunks of many sessions interleaved, each session reads back its own
// records in order through its manifest, a tail torn by a crash (cut short or damaged) is ignored, and retention deletes
// a segment only once no session it holds still has a log.
import t, { type Test } from 'tap';
import { existsSync, mkdirSync, readFileSync, truncateSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { SEGMENT_HEAD, LocalAudioLogStore, RecordBuffer, RecordType, encodeChunk, parseSegment, readSessionLog, segmentName, type AudioLogHeader, type LogRecord } from '../../../engine/listen/audio-log.js';
import { AudioLogSweep } from '../../../engine/listen/audio-log-sweep.js';
import { createLogger } from '../../../engine/logger.js';

const logger = createLogger('silent');

const header = (sessionId: string, writer = 'w1'): AudioLogHeader => ({ sessionId, uid: 'u1', codec: 'opus', sampleRate: 16000, channels: 1, language: 'en', source: 'omi', writer, createdAtMs: 1 });
const frame = (s: number, n: number): Uint8Array => Uint8Array.from({ length: 40 + ((n + s) % 7) }, (_, i) => (n * 31 + s * 7 + i) & 0xff);
const SESSIONS = ['s0', 's1', 's2'];
const PASSES = 4;
const PER_PASS = 5;

/** `passes` write passes of one segment, each a chunk of every session (5 frames each; marks first and last). */
async function written(t: Test, o: { writer?: string; seq?: number; sessions?: string[]; passes?: number; dir?: string } = {}): Promise<{ store: LocalAudioLogStore; name: string; file: string }> {
  const store = new LocalAudioLogStore(o.dir ?? t.testdir());
  const writer = o.writer ?? 'w1';
  const name = segmentName(writer, o.seq ?? 0);
  const sessions = o.sessions ?? SESSIONS;
  const passes = o.passes ?? PASSES;
  for (const id of sessions) await store.createManifest(id, [{ header: header(id, writer) }, { writer, from: o.seq ?? 0 }]).catch(() => store.appendManifest(id, [{ writer, from: o.seq ?? 0 }], true));
  const seg = await store.createSegment(name, 5);
  for (let pass = 0; pass < passes; pass++) {
    const chunks: Uint8Array[] = [];
    for (const [s, id] of sessions.entries()) {
      const b = new RecordBuffer(16);
      if (pass === 0) b.mark(0, { kind: 'start', epoch: 0, wallMs: 5 });
      for (let k = 0; k < PER_PASS; k++) {
        const n = pass * PER_PASS + k;
        b.push(RecordType.AUDIO, n * 20, frame(s, n));
      }
      if (pass === passes - 1) b.mark(passes * PER_PASS * 20, { kind: 'end', epoch: 0 });
      chunks.push(encodeChunk(id, b.view()));
    }
    await seg.append(chunks);
  }
  await seg.close();
  return { store, name, file: store.segmentFile(name) };
}

const audioOf = (records: readonly LogRecord[]): { offsetMs: number; bytes: Buffer }[] =>
  records.filter((r) => r.type === RecordType.AUDIO).map((r) => ({ offsetMs: r.offsetMs, bytes: Buffer.from((r as { bytes: Uint8Array }).bytes) }));

t.test('chunks of many sessions interleave in one segment; each session reads back its own records in order', async (t) => {
  const { store, name, file } = await written(t);
  const p = parseSegment(readFileSync(file))!;
  t.equal(p.tornBytes, 0);
  t.same(p.chunks.map((c) => c.sessionId), Array.from({ length: PASSES }, () => SESSIONS).flat(), 'one chunk per session per pass, interleaved');
  for (const [s, id] of SESSIONS.entries()) {
    const read = (await readSessionLog(store, id))!;
    t.same(read.header, header(id));
    t.equal(read.runs.length, 1);
    const records = read.runs[0]!.records;
    t.match(records[0], { type: RecordType.MARK, offsetMs: 0, mark: { kind: 'start', epoch: 0, wallMs: 5 } });
    t.match(records.at(-1), { type: RecordType.MARK, mark: { kind: 'end', epoch: 0 } });
    const audio = audioOf(records);
    t.same(audio.map((r) => r.offsetMs), Array.from({ length: PASSES * PER_PASS }, (_, n) => n * 20), `${id}: its offsets, in order`);
    t.ok(audio.every((r, n) => r.bytes.equals(Buffer.from(frame(s, n)))), `${id}: its bytes, none of another session's`);
  }
  // With the index stored beside the segment the reader reads only the session's chunks: the same records.
  await store.writeIndex(name, { bytes: p.validBytes, sessions: { s1: p.chunks.filter((c) => c.sessionId === 's1').map((c) => [c.at, c.length]) } });
  t.same(audioOf((await readSessionLog(store, 's1'))!.runs[0]!.records).length, PASSES * PER_PASS);
  t.equal(await readSessionLog(store, 'nobody'), undefined);
  await t.rejects(store.createSegment(name, 6), { code: 'EEXIST' }, 'a segment has one writer');
});

t.test('a chunk cut short at any byte is ignored, with everything before it kept', async (t) => {
  const { store, file } = await written(t);
  const whole = readFileSync(file);
  const full = parseSegment(whole)!;
  const last = full.chunks.at(-1)!;
  for (let cut = last.at + 1; cut < whole.length; cut++) {
    const p = parseSegment(whole.subarray(0, cut))!;
    t.equal(p.chunks.length, full.chunks.length - 1, `cut at ${cut}: the torn chunk is dropped`);
    if (p.validBytes !== last.at || p.tornBytes !== cut - last.at) t.fail(`cut at ${cut}: valid ${p.validBytes}`);
  }
  truncateSync(file, whole.length - 3);
  // The last chunk was s2's last pass: s2 reads back up to its previous pass, the others in full.
  const s2 = audioOf((await readSessionLog(store, 's2'))!.runs[0]!.records);
  t.equal(s2.length, (PASSES - 1) * PER_PASS, 'the torn chunk is not read');
  t.equal(audioOf((await readSessionLog(store, 's1'))!.runs[0]!.records).length, PASSES * PER_PASS);
  t.equal(parseSegment(whole.subarray(0, SEGMENT_HEAD - 1)), undefined, 'a segment cut inside its head');
});

t.test('a damaged byte fails its chunk\'s checksum: that chunk and every later one are ignored', async (t) => {
  const { store, file } = await written(t);
  const whole = readFileSync(file);
  const full = parseSegment(whole)!;
  const victim = full.chunks[4]!; // s1's second pass
  const bad = Buffer.from(whole);
  bad[victim.at + victim.length - 10] = (bad[victim.at + victim.length - 10]! ^ 0xff) & 0xff;
  writeFileSync(file, bad);
  const p = parseSegment(bad)!;
  t.equal(p.chunks.length, 4);
  t.equal(p.validBytes, victim.at);
  t.equal(audioOf((await readSessionLog(store, 's0'))!.runs[0]!.records).length, 2 * PER_PASS);
  t.equal(audioOf((await readSessionLog(store, 's1'))!.runs[0]!.records).length, PER_PASS);
});

t.test('a session written by two writers reads back writer by writer, each in its range of segments', async (t) => {
  const dir = t.testdir();
  const a = await written(t, { dir, writer: 'wa', sessions: ['s0', 's1'], passes: 2 });
  await a.store.appendManifest('s0', [{ writer: 'wa', to: 0 }], false);
  await written(t, { dir, writer: 'wa', seq: 1, sessions: ['s1'], passes: 1 });
  await written(t, { dir, writer: 'wb', seq: 3, sessions: ['s0'], passes: 1 });
  const s0 = (await readSessionLog(a.store, 's0'))!;
  t.same(s0.runs.map((r) => [r.writer, audioOf(r.records).length]), [['wa', 2 * PER_PASS], ['wb', PER_PASS]], 'node a\'s records, then node b\'s');
  const s1 = (await readSessionLog(a.store, 's1'))!;
  t.same(s1.runs.map((r) => [r.writer, audioOf(r.records).length]), [['wa', 3 * PER_PASS], ['wa', 0]], 'without a `to` line every later segment of the writer is read, none twice');
});

t.test('retention: a log goes after its retention; a segment goes once none of its sessions has a log', async (t) => {
  const dir = t.testdir();
  const { store, name } = await written(t, { dir, sessions: ['old', 'busy'], passes: 2 });
  const other = await written(t, { dir, seq: 1, sessions: ['old'], passes: 1 });
  const legacy = path.join(store.dir, 'aaaaaaaa-0000-4000-8000-000000000000');
  mkdirSync(legacy);
  writeFileSync(path.join(legacy, '000000.log'), 'WBAL');
  let now = Date.now();
  const base: ConstructorParameters<typeof AudioLogSweep>[0] = {
    store,
    logger,
    now: () => now,
    writer: 'w-sweeper',
    retentionMs: 60_000,
    isOpen: () => false,
    writerAlive: async () => false,
    claim: async () => true,
    conversations: { getById: async () => undefined, segments: async () => [] },
    openConversation: async () => 'c1',
    keep: async () => void t.fail('finished connections are not handed over'),
  };
  await new AudioLogSweep(base).run();
  t.ok(existsSync(store.manifestFile('old')) && existsSync(store.segmentFile(name)), 'kept during the retention');
  t.ok(existsSync(legacy), 'a log of the earlier layout too');
  // `busy` is still open on some node (as the sweep sees it): it keeps the segment the two share.
  const open = new Set(['busy']);
  const sweep2 = new AudioLogSweep({ ...base, isOpen: (id) => open.has(id) });
  now += 61_000;
  await sweep2.run();
  t.notOk(existsSync(store.manifestFile('old')), 'the log past its retention is deleted');
  t.notOk(existsSync(other.file), 'a segment only it used is deleted');
  t.ok(existsSync(store.segmentFile(name)), 'the segment it shares with an open session stays');
  t.ok(existsSync(`${store.segmentFile(name).slice(0, -4)}.idx`), 'the dead writer\'s segment got its index');
  t.ok(sweep2.retainedBytes > 0, 'what stays counts against the node');
  t.notOk(existsSync(legacy), 'a log of the earlier layout goes after the retention, unread');
  open.clear();
  await sweep2.run();
  t.notOk(existsSync(store.manifestFile('busy')));
  t.notOk(existsSync(store.segmentFile(name)), 'deleted once no session in it has a log');
  t.equal(sweep2.retainedBytes, 0);
});
