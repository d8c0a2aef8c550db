// The process-wide scheduler: one heap, driven by the injected clock; order, repeats, cancel, late ticks, async entries.
import t from 'tap';
import { ManualClock } from '../../engine/clock.js';
import { Scheduler } from '../../engine/scheduler.js';

t.test('one-shots run once, in due order, only when due', async (t) => {
  const clock = new ManualClock(0);
  const s = new Scheduler({ clock, resolutionMs: 0 });
  const log: string[] = [];
  s.schedule(300, () => log.push('c'));
  s.after(100, () => log.push('a'));
  s.schedule(100, () => log.push('b'));
  await s.tick();
  t.same(log, [], 'nothing due at 0');
  clock.advance(100);
  await s.tick();
  t.same(log, ['a', 'b'], 'equal times run in scheduling order');
  clock.advance(1000);
  await s.tick();
  await s.tick();
  t.same(log, ['a', 'b', 'c'], 'each once');
  t.equal(s.size, 0);
  s.close();
});

t.test('repeats keep their grid; a late tick runs a repeat once', async (t) => {
  const clock = new ManualClock(0);
  const s = new Scheduler({ clock, resolutionMs: 0 });
  const at: number[] = [];
  const id = s.every(600, () => at.push(clock.now()));
  clock.advance(600);
  await s.tick();
  clock.advance(650);
  await s.tick();
  t.same(at, [600, 1250]);
  clock.advance(5000);
  await s.tick();
  t.equal(at.length, 3, 'one run for a late tick, not one per missed period');
  // now 6250; the grid (600, 1200, 1800, …) puts the next run at 6600
  clock.advance(300);
  await s.tick();
  t.equal(at.length, 3, 'stays on the 600 ms grid');
  clock.advance(50);
  await s.tick();
  t.same(at.slice(3), [6600]);
  s.cancel(id);
  clock.advance(6000);
  await s.tick();
  t.equal(at.length, 4, 'cancelled');
  t.equal(s.size, 0);
  t.throws(() => s.every(0, () => undefined));
  s.close();
});

t.test('tick awaits async entries; errors go to onError and never stop the wheel', async (t) => {
  const clock = new ManualClock(0);
  const errors: unknown[] = [];
  const s = new Scheduler({ clock, resolutionMs: 0, onError: (e) => errors.push(e) });
  let done = false;
  // Finishes a macrotask later: a tick that did not await it would resolve first.
  s.after(10, async () => {
    await new Promise((r) => setImmediate(r));
    done = true;
  });
  s.after(10, () => {
    throw new Error('sync');
  });
  s.after(10, () => Promise.reject(new Error('async')));
  let ran = false;
  s.after(10, () => (ran = true));
  clock.advance(10);
  await s.tick();
  t.ok(done, 'async entry finished before tick resolved');
  t.ok(ran, 'later entries still ran');
  t.equal(errors.length, 2);
  s.close();
  t.throws(() => s.after(1, () => undefined), 'closed');
});

t.test('the production interval ticks on its own and does not hold the process', async (t) => {
  const s = new Scheduler({ clock: { now: () => Date.now() }, resolutionMs: 5 });
  // The interval is unref'd: a referenced timer keeps this test's process alive meanwhile.
  const guard = setInterval(() => undefined, 20);
  const ran = await new Promise<boolean>((resolve) => {
    s.after(10, () => resolve(true));
  });
  clearInterval(guard);
  t.ok(ran);
  s.close();
});
