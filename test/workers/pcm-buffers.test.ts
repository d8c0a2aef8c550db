// The codec shards' reused PCM memory (workers/packing.ts PcmBuffers): answers fill handed-back buffers, scratch views
// of one task never overlap, and what is kept stays bounded.
import t from 'tap';
import { INITIAL_SCRATCH_SAMPLES, MAX_SPARE_BUFFERS, OVERSIZE_FACTOR, packAnswer, PcmBuffers, recycledBytes, SCRATCH_LOOK_TASKS } from '../../workers/packing.js';

t.test('an answer fills a handed-back buffer large enough, else a fresh power-of-two one', async (t) => {
  const b = new PcmBuffers();
  const fresh = b.answer(100);
  t.equal(fresh.length, 100);
  t.equal(fresh.buffer.byteLength, 16 * 1024, 'at least 16 KiB');
  t.equal(recycledBytes(40_000), 64 * 1024);
  const back = new ArrayBuffer(32 * 1024);
  b.give([new ArrayBuffer(1024), back]);
  const reused = b.answer(10_000);
  t.equal(reused.buffer, back, 'the 32 KiB buffer handed back holds 20,000 bytes');
  t.equal(reused.length, 10_000);
  t.equal(b.spareBuffers, 1, 'the 1 KiB one waits for a smaller answer');
  t.equal(b.answer(400).buffer.byteLength, 1024, 'and gets it');
  t.equal(b.answer(400).buffer.byteLength, 16 * 1024, 'none left: a fresh one');
});

t.test('at most MAX_SPARE_BUFFERS are kept; empty ones are not', async (t) => {
  const b = new PcmBuffers();
  b.give(Array.from({ length: MAX_SPARE_BUFFERS + 3 }, () => new ArrayBuffer(16 * 1024)));
  t.equal(b.spareBuffers, MAX_SPARE_BUFFERS);
  const c = new PcmBuffers();
  c.give([new ArrayBuffer(0)]);
  t.equal(c.spareBuffers, 0);
});

t.test('scratch views of one task never overlap; a reset task reuses the same memory', async (t) => {
  const b = new PcmBuffers();
  const a1 = b.scratch(3000);
  const a2 = b.scratch(3000);
  a1.fill(1);
  a2.fill(2);
  t.ok(a1.every((v) => v === 1), 'the second view did not write into the first');
  // Larger than what is left: a new area; the views handed out keep theirs.
  const big = b.scratch(20_000);
  big.fill(3);
  t.ok(a1.every((v) => v === 1) && a2.every((v) => v === 2));
  b.reset();
  const next = b.scratch(20_000);
  t.equal(next.buffer, big.buffer, 'the next task writes where the last one did');
});

t.test('a scratch area a burst grew is given back once tasks have needed far less of it for a while', async (t) => {
  const b = new PcmBuffers();
  const task = (samples: number): void => {
    b.reset();
    for (let left = samples; left > 0; left -= 320) b.scratch(Math.min(320, left));
  };
  task(1_000_000); // a backlog: 1M samples of frames in one task, in areas of 8K, 16K, ... samples
  t.equal(b.scratchSamples, 512 * 1024, 'the burst grew the area');
  const grown = b.scratchSamples;
  for (let i = 0; i < SCRATCH_LOOK_TASKS; i++) task(50_000);
  t.equal(b.scratchSamples, grown, 'kept while the burst is in the period looked at');
  // reset() looks every SCRATCH_LOOK_TASKS calls: the burst's was call 1, the first look call 64 (the burst in it).
  for (let i = 0; i < SCRATCH_LOOK_TASKS - 2; i++) task(50_000);
  t.equal(b.scratchSamples, grown, 'and until a whole period of small tasks has passed');
  task(50_000);
  t.equal(b.scratchSamples, 128 * 1024, 'then twice what the period needed, a power of two');
  const view = b.scratch(60_000);
  t.equal(view.length, 60_000);
  // An area the tasks use stays, even when most tasks are small.
  const busy = new PcmBuffers();
  const busyTask = (samples: number): void => {
    busy.reset();
    busy.scratch(samples);
  };
  busyTask(200_000);
  const size = busy.scratchSamples;
  for (let i = 0; i < SCRATCH_LOOK_TASKS * 3; i++) busyTask(i % 16 === 0 ? 150_000 : 1_000);
  t.equal(busy.scratchSamples, size, 'one task in 16 needs most of it: it stays');
  const fresh = new PcmBuffers();
  for (let i = 0; i < SCRATCH_LOOK_TASKS * 2; i++) fresh.reset();
  t.equal(fresh.scratchSamples, INITIAL_SCRATCH_SAMPLES, 'never below its first size');
});

t.test('spare answer buffers far larger than a period of answers needed are let go; ones they still need stay', async (t) => {
  const b = new PcmBuffers();
  /** One task: its answer of `samples`, and the buffer handed back with the next task, as the main thread does. */
  const task = (samples: number): ArrayBuffer => {
    b.reset();
    const a = b.answer(samples);
    b.give([a.buffer as ArrayBuffer]);
    return a.buffer as ArrayBuffer;
  };
  const big = task(500_000); // a burst: a 1 MiB answer
  t.equal(big.byteLength, 1024 * 1024);
  t.equal(task(100), big, 'the next, small answer rides in it: kept while the burst is in the period');
  // Answers that alternate between small and large keep the large buffer: no fresh one for every large answer.
  for (let i = 0; i < SCRATCH_LOOK_TASKS * 3; i++) t.equal(task(i % 10 === 0 ? 400_000 : 100), big);
  // Once a whole period has needed at most 16 KiB, the 1 MiB buffer is let go: a fresh 16 KiB one replaces it.
  let last = big;
  for (let i = 0; i < SCRATCH_LOOK_TASKS * 2 && last === big; i++) last = task(100);
  t.equal(last.byteLength, 16 * 1024);
  t.equal(b.spareBuffers, 1);
  t.equal(task(100).byteLength, 16 * 1024, 'and small answers go on in it');
  t.ok(OVERSIZE_FACTOR * 16 * 1024 < 1024 * 1024);
});

t.test('packAnswer with PcmBuffers: the same entries and samples as without, over a recycled buffer', async (t) => {
  const parts = [
    { key: 7, result: { pcm: [[Int16Array.of(1, 2, 3), Int16Array.of(4)]], frames: 2, corruptFrames: 0, recreated: false } },
    { key: 9, result: { ok: false as const, code: 'ENG_ERR_CODEC_FAILED' as const, message: 'bad' } },
    { key: 8, result: { pcm: [Int16Array.of(5, 6)].map((c) => [c]), frames: 1, corruptFrames: 1, recreated: true } },
  ];
  const plain = packAnswer(parts);
  const b = new PcmBuffers();
  const back = new ArrayBuffer(16 * 1024);
  new Int16Array(back).fill(-1); // what an earlier answer left there
  b.give([back]);
  const recycled = packAnswer(parts, b);
  t.equal(recycled.pcm.buffer, back);
  t.same([...recycled.pcm], [...plain.pcm], 'only the samples of this answer, none of the earlier one');
  t.same([...recycled.entries], [...plain.entries]);
  t.same(recycled.failures, plain.failures);
});
