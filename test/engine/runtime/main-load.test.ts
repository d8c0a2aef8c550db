// MainLoad: the main thread's busy share decides whether it takes one more session's decoding.
import t from 'tap';
import { ManualClock } from '../../../engine/clock.js';
import { MainLoad, busyShare, type LoopTimes } from '../../../engine/runtime/main-load.js';

/** A main thread whose loop was busy `share` of each period the test moves the clock by. */
function loop(clock: ManualClock): { times: LoopTimes; run: (ms: number, share: number) => void } {
  const times = { idle: 0, active: 0 };
  return {
    times,
    run(ms, share) {
      clock.advance(ms);
      times.active += ms * share;
      times.idle += ms * (1 - share);
    },
  };
}

t.test('takes sessions while the last second was quiet enough, and no more than its room at once', async (t) => {
  const clock = new ManualClock();
  const l = loop(clock);
  const load = new MainLoad({ limit: 0.25, clock, read: () => ({ ...l.times }) });
  l.run(1000, 0.05);
  // 5% busy with no session: each new one is reckoned at the least share (0.2%), so (25 - 5) / 0.2 = 100 fit.
  let taken = 0;
  while (load.admit(taken)) taken++;
  t.equal(taken, 100, 'a burst of opens within one second stops at the reckoned room');
  t.equal(load.busy, 0.05);
  t.notOk(load.admit(100), 'and stays shut until the next reading');
  // Those sessions made the thread 23% busy, 0.23% each: 8 more fit under 25% (at the least share it would be 10).
  l.run(1000, 0.23);
  let more = 0;
  while (load.admit(100 + more)) more++;
  t.equal(more, 8, 'the next second, the share one session takes is read from the load they make');
});

t.test('a busy thread takes none; once it calms down it takes again', async (t) => {
  const clock = new ManualClock();
  const l = loop(clock);
  const load = new MainLoad({ limit: 0.25, clock, read: () => ({ ...l.times }) });
  l.run(1000, 0.6);
  t.notOk(load.admit(300));
  l.run(500, 0.1);
  t.notOk(load.admit(300), 'half a second later the reading is not renewed');
  l.run(500, 0.1);
  t.ok(load.admit(300), 'the second since the last reading was 10% busy');
});

t.test('limit 0 takes nothing; a limit outside 0-1 is refused', async (t) => {
  const clock = new ManualClock();
  const load = new MainLoad({ limit: 0, clock, read: () => ({ idle: 0, active: 0 }) });
  clock.advance(5000);
  t.notOk(load.admit(0));
  t.throws(() => new MainLoad({ limit: 1.5, clock }), RangeError);
  t.throws(() => new MainLoad({ limit: Number.NaN, clock }), RangeError);
});

t.test('reads the real event loop by default', async (t) => {
  const clock = new ManualClock();
  const load = new MainLoad({ limit: 0.5, clock });
  // Work without yielding to the loop, then ask with the clock a period on: all of that time was the loop's work.
  let sum = 0;
  for (let i = 0; i < 1_000_000; i++) sum += i % 7;
  clock.advance(1000);
  load.admit(0);
  t.ok(load.busy > 0.5, `work that never yields reads as busy (${load.busy.toFixed(2)})`);
  t.ok(sum > 0);
});

t.test('busyShare: the active part of the time between two readings', async (t) => {
  t.equal(busyShare({ active: 10, idle: 10 }, { active: 40, idle: 100 }), 0.25);
  t.equal(busyShare({ active: 10, idle: 10 }, { active: 10, idle: 10 }), undefined, 'no time passed');
  t.equal(busyShare({ active: 500, idle: 900 }, { active: 3, idle: 7 }), undefined, 'a replaced thread counts from zero');
});
