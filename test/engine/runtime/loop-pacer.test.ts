// LoopPacer on a hand-moved clock: when it starts pacing, how long each loop turn sleeps, when it stops.
import t from 'tap';
import { performance } from 'node:perf_hooks';
import { LoopPacer } from '../../../engine/runtime/loop-pacer.js';

/** A pacer whose clock, sleep and next-turn queue the test drives. */
function rig(intervalMs = 5, minFrames = 8) {
  let now = 1000;
  const sleeps: number[] = [];
  const turns: (() => void)[] = [];
  /** Milliseconds each sleep lasts beyond what it asked for (a host slow to wake the thread). */
  const late = { ms: 0 };
  const pacer = new LoopPacer({
    intervalMs,
    minFrames,
    now: () => now,
    sleep: (ms) => {
      sleeps.push(ms);
      now += ms + late.ms;
    },
    defer: (fn) => turns.push(fn),
  });
  return {
    pacer,
    sleeps,
    turns,
    late,
    /** Time passes with `frames` frames coming in. */
    pass(ms: number, frames = 0) {
      now += ms;
      for (let i = 0; i < frames; i++) pacer.note();
    },
    /** The loop's next turn: its poll, then the pacer. */
    turn() {
      const fn = turns.shift();
      if (fn === undefined) throw new Error('no turn scheduled');
      fn();
    },
  };
}

t.test('few frames: the loop is left to sleep in epoll', async (t) => {
  const r = rig();
  r.pass(50, 79); // 7.9 frames per 5 ms
  r.pacer.look();
  t.equal(r.pacer.paced, false);
  t.equal(r.turns.length, 0, 'no turn scheduled');
  t.same(r.sleeps, []);
});

t.test('many frames: each turn sleeps out the rest of the interval, measured from the last wake-up', async (t) => {
  const r = rig();
  r.pass(50, 200);
  r.pacer.look();
  t.equal(r.pacer.paced, true);
  t.equal(r.pacer.starts, 1);
  r.pass(1, 3);
  r.turn(); // 1 ms of work since look(): sleeps 4
  t.same(r.sleeps, [4]);
  r.pass(2, 20); // the poll after the sleep found 20 frames, handled in 2 ms
  r.turn();
  t.same(r.sleeps, [4, 3], 'polls 5 ms apart');
  r.pass(7, 40); // a turn whose work took longer than the interval
  r.turn();
  t.same(r.sleeps, [4, 3], 'no sleep after a long turn');
  t.equal(r.turns.length, 1, 'the next turn is scheduled at once');
  r.pass(1, 9);
  r.turn();
  t.same(r.sleeps, [4, 3, 4]);
  t.equal(r.pacer.sleptMs, 11, 'time slept is counted');
});

t.test('a whole interval with few frames ends pacing; look() can start it again', async (t) => {
  const r = rig();
  r.pass(50, 200);
  r.pacer.look();
  r.turn();
  r.pass(1, 7); // the interval slept through brought 7 frames
  r.turn();
  t.equal(r.pacer.paced, false, 'back to epoll');
  t.equal(r.turns.length, 0);
  r.pass(50, 10);
  r.pacer.look();
  t.equal(r.pacer.paced, false, 'the frames while it stopped are counted from the stop');
  r.pass(50, 100);
  r.pacer.look();
  t.equal(r.pacer.paced, true);
  t.equal(r.pacer.starts, 2);
});

t.test('a short first turn with few frames does not end pacing', async (t) => {
  const r = rig();
  r.pass(50, 200);
  r.pacer.look();
  r.pass(0.5, 1);
  r.turn();
  t.equal(r.pacer.paced, true);
  t.same(r.sleeps, [4.5]);
});

t.test('look() while paced leaves the count to the paced turns', async (t) => {
  const r = rig();
  r.pass(50, 200);
  r.pacer.look();
  r.turn();
  r.pass(1, 30);
  r.pacer.look();
  r.turn();
  t.equal(r.pacer.paced, true, 'the 30 frames were still counted by the turn');
  t.equal(r.turns.length, 1);
});

t.test('close() ends pacing at the next turn and for good', async (t) => {
  const r = rig();
  r.pass(50, 200);
  r.pacer.look();
  r.pacer.close();
  r.turn();
  t.equal(r.pacer.paced, false);
  t.equal(r.turns.length, 0);
  r.pass(50, 200);
  r.pacer.look();
  t.equal(r.pacer.paced, false);
});

t.test('a sleep that ends late counts what it lasted, and the next interval starts from the late wake-up', async (t) => {
  const r = rig();
  r.pass(50, 200);
  r.pacer.look();
  r.pass(1, 10);
  r.late.ms = 3;
  r.turn(); // asks for 4 ms, wakes after 7
  t.equal(r.pacer.sleptMs, 7, 'the 3 ms late count as slept, not as work');
  r.late.ms = 0;
  r.pass(1, 10);
  r.turn();
  t.same(r.sleeps, [4, 4], 'the next poll is an interval after the late wake-up');
  t.equal(r.pacer.sleptMs, 11);
});

t.test('an interval of 0 never paces; a negative one is refused', async (t) => {
  const r = rig(0);
  r.pass(50, 10_000);
  r.pacer.look();
  t.equal(r.pacer.paced, false);
  t.throws(() => new LoopPacer({ intervalMs: -1 }), RangeError);
});

t.test('the default sleep blocks the thread for the rest of the interval', async (t) => {
  let turn: (() => void) | undefined;
  const pacer = new LoopPacer({ intervalMs: 20, minFrames: 1, defer: (fn) => (turn = fn) });
  for (let i = 0; i < 100; i++) pacer.note();
  pacer.look();
  const t0 = performance.now();
  turn!();
  const blocked = performance.now() - t0;
  t.ok(blocked >= 19, `blocked ${blocked.toFixed(1)} ms`);
  t.ok(pacer.sleptMs > 15 && pacer.sleptMs <= blocked, `counted ${pacer.sleptMs.toFixed(1)} ms`);
});
