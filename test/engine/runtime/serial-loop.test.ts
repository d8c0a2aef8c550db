// The serial loop: a caller's queue worked through in order, one step at a time, idle(), stop(), a throwing step.
import t from 'tap';
import { SerialLoop } from '../../../engine/runtime/serial-loop.js';

/** A queue of items whose steps finish when the test says so. */
function harness() {
  const queue: number[] = [];
  const done: number[] = [];
  const pending: (() => void)[] = [];
  let inFlight = 0;
  let maxInFlight = 0;
  const loop = new SerialLoop({
    ready: () => queue.length > 0,
    step: async () => {
      const item = queue.shift()!;
      inFlight++;
      maxInFlight = Math.max(maxInFlight, inFlight);
      await new Promise<void>((resolve) => pending.push(resolve));
      inFlight--;
      done.push(item);
    },
  });
  const push = (item: number): void => {
    queue.push(item);
    loop.kick();
  };
  /** Finishes the step in flight and lets the loop take the next. */
  const finishStep = async (): Promise<void> => {
    pending.shift()!();
    await new Promise<void>((resolve) => setImmediate(resolve));
  };
  return { loop, queue, done, pending, push, finishStep, maxInFlight: () => maxInFlight };
}

t.test('items are processed in order, one at a time', async (t) => {
  const h = harness();
  h.push(1);
  h.push(2);
  h.push(3);
  t.equal(h.pending.length, 1, 'kicks while running start no second step');
  for (let i = 0; i < 3; i++) await h.finishStep();
  t.same(h.done, [1, 2, 3]);
  t.equal(h.maxInFlight(), 1);
  t.equal(h.pending.length, 0, 'the loop stopped with the queue empty');
});

t.test('an item added while the last step finishes is not stranded', async (t) => {
  const h = harness();
  h.push(1);
  h.pending.shift()!();
  h.push(2); // the loop is still running: this kick is a no-op, the loop itself must take 2
  await new Promise<void>((resolve) => setImmediate(resolve));
  t.equal(h.pending.length, 1, 'item 2 is in flight');
  await h.finishStep();
  t.same(h.done, [1, 2]);
  h.push(3);
  t.equal(h.pending.length, 1, 'a kick after the loop ended starts it again');
  await h.finishStep();
  t.same(h.done, [1, 2, 3]);
});

t.test('kick() does nothing while nothing is ready', async (t) => {
  let steps = 0;
  const loop = new SerialLoop({ ready: () => false, step: async () => void steps++ });
  loop.kick();
  await loop.idle();
  t.equal(steps, 0);
});

t.test('idle() resolves once the queue is worked through, at once when not running', async (t) => {
  const h = harness();
  let idle = false;
  await h.loop.idle();
  h.push(1);
  h.push(2);
  const waiting = h.loop.idle().then(() => (idle = true));
  await h.finishStep();
  t.equal(idle, false, 'not idle while item 2 runs');
  await h.finishStep();
  await waiting;
  t.same(h.done, [1, 2]);
});

t.test('stop() lets the running step finish and starts no other', async (t) => {
  const h = harness();
  h.push(1);
  h.push(2);
  let stopped = false;
  const stopping = h.loop.stop().then(() => (stopped = true));
  t.equal(h.loop.stopped, true);
  await new Promise<void>((resolve) => setImmediate(resolve));
  t.equal(stopped, false, 'waits for the step in flight');
  await h.finishStep();
  await stopping;
  t.same(h.done, [1]);
  t.same(h.queue, [2], 'queued work stays with the caller');
  h.push(3);
  t.equal(h.pending.length, 0, 'kick() after stop() starts nothing');
  await h.loop.stop();
  t.pass('stop() is idempotent');
});

t.test('a step that throws ends the run: idle() rejects with its error and the next kick runs again', async (t) => {
  const queue: string[] = [];
  const done: string[] = [];
  const loop = new SerialLoop({
    ready: () => queue.length > 0,
    step: async () => {
      const item = queue.shift()!;
      await Promise.resolve();
      if (item === 'bad') throw Object.assign(new Error('step failed'), { code: 'TEST_STEP' });
      done.push(item);
    },
  });
  queue.push('a', 'bad', 'b');
  loop.kick();
  await t.rejects(loop.idle(), { code: 'TEST_STEP' });
  t.same(done, ['a'], 'the run ended at the failing step');
  t.same(queue, ['b']);
  loop.kick();
  await loop.idle();
  t.same(done, ['a', 'b'], 'the loop is not wedged');
});
