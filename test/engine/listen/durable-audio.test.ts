// The write pass of acknowledged audio on real files: one write and one sync for every session of the node, the
// acknowledgements after it, and frames arriving during a write left for the next pass (not a write of their own).
import t from 'tap';
import { DurableAudio, type LogConnection } from '../../../engine/listen/durable-audio.js';
import { LocalAudioLogStore, RecordType, parseSegment, readSessionLog, type SegmentWriter } from '../../../engine/listen/audio-log.js';
import { ManualClock } from '../../../engine/clock.js';
import { Scheduler } from '../../../engine/scheduler.js';
import { createLogger } from '../../../engine/logger.js';
import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { until } from '../../helpers/until.js';

/** 20 ms of pcm16 at 16 kHz, its samples all `n`. */
const frame = (n: number): Uint8Array => new Uint8Array(new Int16Array(320).fill(n).buffer);

/** Local files whose segment writes wait at a gate the test opens, counting the appends and their chunks. */
class GatedStore extends LocalAudioLogStore {
  appends: number[] = [];
  gate: Promise<void> | undefined;
  override async createSegment(name: string, createdAtMs: number): Promise<SegmentWriter> {
    const w = await super.createSegment(name, createdAtMs);
    return {
      append: async (chunks) => {
        this.appends.push(chunks.length);
        await this.gate;
        await w.append(chunks);
      },
      close: () => w.close(),
    };
  }
}

t.test('one write per pass for every session; frames that arrive during it wait for the next pass', async (t) => {
  const store = new GatedStore(t.testdir());
  const clock = new ManualClock();
  const scheduler = new Scheduler({ clock, resolutionMs: 0 });
  const d = new DurableAudio({ store, clock, scheduler, logger: createLogger('silent'), writer: 'w1', maxSessionBytes: 1 << 30, maxNodeBytes: 1 << 30 });
  t.teardown(() => d.close());
  const sent = new Map<string, string[]>();
  const conns: LogConnection[] = [];
  for (const id of ['a', 'b', 'c']) {
    const c = d.connection({ sessionId: id, uid: 'u1', codec: 'pcm16', sampleRate: 16000, channels: 1, language: 'en', source: 'omi' });
    sent.set(id, []);
    t.ok(await c.open({ send: (m) => sent.get(id)!.push(m), accept: () => undefined, close: () => t.fail('not closed'), conversationId: () => undefined }));
    conns.push(c);
  }
  const acks = (id: string): number[] => sent.get(id)!.filter((m) => m.includes('audio_ack')).map((m) => JSON.parse(m).offset_ms as number);
  for (let n = 0; n < 5; n++) for (const c of conns) c.take(frame(n));

  let open!: () => void;
  store.gate = new Promise((r) => (open = r));
  clock.advance(1000);
  const first = scheduler.tick();
  await until(() => store.appends.length > 0, { what: 'the pass to write' });
  t.same(store.appends, [6], 'one append: a chunk head and the records of each of the three sessions');
  // Frames during the write (the sync not yet returned): acknowledged by the next pass only.
  for (let n = 5; n < 8; n++) for (const c of conns) c.take(frame(n));
  t.same(acks('a'), [], 'nothing acknowledged before the sync returns');
  open();
  await first;
  t.same(store.appends, [6], 'the frames that arrived during the write did not get a write of their own');
  for (const id of ['a', 'b', 'c']) t.same(acks(id), [100], `${id}: one ack, for what the pass wrote`);

  clock.advance(1000);
  await scheduler.tick();
  t.same(store.appends, [6, 6], 'the next pass writes them');
  for (const id of ['a', 'b', 'c']) t.same(acks(id), [100, 160]);
  clock.advance(1000);
  await scheduler.tick();
  t.same(store.appends, [6, 6], 'a pass with nothing new writes nothing');
  t.equal(d.writes, 2);

  // On disk: one segment, the sessions' chunks interleaved, each session's frames in order.
  const dir = path.join(store.dir, 'segments');
  const segs = readdirSync(dir).filter((n) => n.endsWith('.seg'));
  t.equal(segs.length, 1);
  const parsed = parseSegment(readFileSync(path.join(dir, segs[0]!)))!;
  t.same(parsed.chunks.map((c) => c.sessionId), ['a', 'b', 'c', 'a', 'b', 'c']);
  const read = (await readSessionLog(store, 'b', { liveIndex: (n) => d.liveIndex(n) }))!;
  const audio = read.runs[0]!.records.filter((r) => r.type === RecordType.AUDIO);
  t.same(audio.map((r) => r.offsetMs), [0, 20, 40, 60, 80, 100, 120, 140]);
  t.same(audio.map((r) => (r.type === RecordType.AUDIO ? Buffer.from(r.bytes).readInt16LE(0) : -1)), [0, 1, 2, 3, 4, 5, 6, 7]);
});
