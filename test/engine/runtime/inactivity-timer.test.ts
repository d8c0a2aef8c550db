// The inactivity timer: fires once after the quiet time, touches push it back, stop() cancels, one heap entry at a time.
import t from 'tap';
import { ManualClock } from '../../../engine/clock.js';
import { Scheduler } from '../../../engine/scheduler.js';
import { InactivityTimer } from '../../../engine/runtime/inactivity-timer.js';

t.test('fires after timeoutMs of quiet, counted from the last touch', async (t) => {
  const clock = new ManualClock();
  const scheduler = new Scheduler({ clock, resolutionMs: 0 });
  t.teardown(() => scheduler.close());
  let fired = 0;
  const timer = new InactivityTimer({ clock, scheduler, timeoutMs: 90_000, onIdle: () => fired++ });
  timer.start();
  timer.start();
  t.equal(scheduler.size, 1, 'start() is idempotent');
  for (let i = 0; i < 100; i++) {
    clock.advance(1000);
    timer.touch();
  }
  t.equal(scheduler.size, 1, 'touches add no timers');
  await scheduler.tick();
  t.equal(fired, 0, '100 s of touches: never quiet for 90 s');
  clock.advance(89_999);
  await scheduler.tick();
  t.equal(fired, 0);
  t.equal(timer.idleMs, 89_999);
  clock.advance(1);
  await scheduler.tick();
  t.equal(fired, 1, 'fires at exactly 90 s of quiet');
  t.equal(scheduler.size, 0, 'and is stopped');
  clock.advance(200_000);
  await scheduler.tick();
  t.equal(fired, 1, 'once');

  timer.touch();
  timer.start();
  timer.stop();
  clock.advance(200_000);
  await scheduler.tick();
  t.equal(fired, 1, 'stop() cancels');
});
