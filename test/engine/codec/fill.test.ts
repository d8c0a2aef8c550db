import t from 'tap';
import { CodecPool } from '../../../engine/codec/pool.js';
import { FILL_BUSY, FILL_WINDOW_MS, OPEN_BUSY, ShardFill } from '../../../engine/codec/fill.js';

/** Two threads whose event-loop times the test sets, and a clock it moves. */
function harness(fillBusy?: number) {
  const times: ({ active: number; idle: number } | undefined)[] = [undefined, undefined];
  let now = 0;
  const fill = new ShardFill(2, (i) => times[i], { now: () => now, ...(fillBusy !== undefined ? { fillBusy } : {}) });
  const sizes = [0, 0];
  const open = (n: number): number[] => {
    const picks = [0, 0];
    for (let i = 0; i < n; i++) {
      const p = fill.pick(sizes);
      sizes[p]!++;
      picks[p]!++;
    }
    return picks;
  };
  /** One window passes in which thread i was busy `busy[i]` of the time. */
  const pass = (busy: number[]): void => {
    now += FILL_WINDOW_MS;
    busy.forEach((b, i) => {
      const was = times[i] ?? { active: 0, idle: 0 };
      times[i] = { active: was.active + b * FILL_WINDOW_MS, idle: was.idle + (1 - b) * FILL_WINDOW_MS };
    });
  };
  return { fill, sizes, open, pass, times };
}

t.test('a lightly loaded node puts its sessions on the first thread', async (t) => {
  const h = harness();
  t.same(h.open(100), [100, 0], 'a hundred sessions at once: the first thread');
  h.pass([0.1, 0]);
  t.same(h.open(100), [100, 0], 'measured at 10% of a core, it takes the next hundred');
  t.ok(Math.abs(h.fill.predicted(0) - (0.1 + 200 * OPEN_BUSY)) < 1e-9, 'counted at its measure plus what came since');
});

t.test('a burst fills the first thread up to the mark before its audio shows, then the next', async (t) => {
  const h = harness();
  const mark = Math.round(FILL_BUSY / OPEN_BUSY);
  t.same(h.open(mark + 10), [mark, 10]);
});

t.test('a thread measured busy takes no more; once all are, the one with the fewest sessions does', async (t) => {
  const h = harness();
  h.open(300);
  h.pass([0.6, 0]);
  h.pass([0.6, 0]);
  t.same(h.open(50), [0, 50], 'the first thread is past the mark');
  h.pass([0.6, 0.55]);
  h.pass([0.6, 0.55]);
  t.same(h.sizes, [300, 50]);
  t.same(h.open(300), [25, 275], 'both past it: by count, the emptier first');
  t.same(h.sizes, [325, 325]);
});

t.test('a thread that replaced a crashed one counts from zero', async (t) => {
  const h = harness();
  h.open(10);
  h.pass([0.9, 0]);
  h.pass([0.9, 0]);
  t.same(h.open(1), [0, 1]);
  h.times[0] = { active: 5, idle: 5 };
  h.pass([0, 0]);
  t.same(h.open(1), [1, 0]);
  t.equal(h.fill.predicted(0), OPEN_BUSY, 'lower times than the last measure: no share of its own, not a negative one');
});

t.test('fillBusy 0 spreads the sessions by count', async (t) => {
  const h = harness(0);
  t.same(h.open(7), [4, 3]);
});

t.test('the pool opens a light node’s sessions on its first thread, and its threads report their times', async (t) => {
  const pool = new CodecPool({ threads: 2 });
  t.teardown(() => pool.close());
  const streams = [0, 1, 2].map((i) => pool.open({ sessionId: `fill-${i}`, codec: 'pcm16', sampleRate: 16000, channels: 1 }));
  await Promise.all(streams.map((s) => s.ready));
  t.same(pool.load, [3, 0]);
  t.same((await pool.threadHeaps()).map((h) => h.shard), [0], 'the second thread was never started');
  const spread = new CodecPool({ threads: 2, fillBusy: 0 });
  t.teardown(() => spread.close());
  [0, 1, 2].forEach((i) => spread.open({ sessionId: `spread-${i}`, codec: 'pcm16', sampleRate: 16000, channels: 1 }));
  t.same(spread.load, [2, 1]);
});
