import t from 'tap';
import { InlineRunner, TaskThread } from '../../../engine/runtime/task-thread.js';
import type { TestTask } from '../../helpers/task-thread-handler.js';
import { loadedBeforeEnd, SLOW_LOAD_HANDLER } from '../../helpers/slow-load.js';

const HANDLER = new URL('../../helpers/task-thread-handler.js', import.meta.url).href;

t.test('answers tasks, sync and async, and moves buffers both ways', async (t) => {
  const thread = new TaskThread<TestTask, unknown>(HANDLER);
  t.teardown(() => thread.destroy());
  const bytes = new Uint8Array([1, 2, 3, 100]);
  const [a, b, c] = await Promise.all([thread.run({ type: 'later', n: 1 }), thread.run({ type: 'echo', n: 2 }), thread.run({ type: 'sum', bytes }, [bytes.buffer])]);
  t.same(a, { n: 1 });
  t.same(b, { n: 2 });
  t.same([...(c as { out: Uint8Array }).out], [2, 4, 6, 200], 'the answer carries the moved buffer');
  t.equal(bytes.byteLength, 0, 'the task buffer was moved, not copied');
  t.same(thread.posted, { tasks: 3, movedBytes: 4 }, 'three tasks posted, four bytes moved with them');
});

t.test('a handler that throws fails its task only', async (t) => {
  const thread = new TaskThread<TestTask, unknown>(HANDLER);
  t.teardown(() => thread.destroy());
  await t.rejects(thread.run({ type: 'throw' }), { message: 'handler refused' });
  t.same(await thread.run({ type: 'echo', n: 7 }), { n: 7 });
});

t.test('a thread that exits fails the tasks it held, is replaced, and says so once', async (t) => {
  const exits: Error[] = [];
  const thread = new TaskThread<TestTask, unknown>(HANDLER, (err) => exits.push(err));
  t.teardown(() => thread.destroy());
  await Promise.all([t.rejects(thread.run({ type: 'hang' }), { message: /exited with code 3/ }), t.rejects(thread.run({ type: 'exit' }), { message: /exited with code 3/ })]);
  t.equal(exits.length, 1);
  t.same(await thread.run({ type: 'echo', n: 9 }), { n: 9 }, 'the new thread answers');
});

t.test('destroy fails pending and later tasks', async (t) => {
  const thread = new TaskThread<TestTask, unknown>(HANDLER);
  const held = t.rejects(thread.run({ type: 'hang' }), { message: 'thread destroyed' });
  await thread.destroy();
  await held;
  await t.rejects(thread.run({ type: 'echo', n: 1 }), { message: 'thread destroyed' });
  await thread.destroy();
});

t.test('destroy lets a thread finish loading its module before ending it, and ends one whose module fails to load', async (t) => {
  let thread: TaskThread<{ n: number }, unknown> | undefined;
  const ended = await loadedBeforeEnd(t, () => {
    thread = new TaskThread<{ n: number }, unknown>(SLOW_LOAD_HANDLER);
    return () => thread!.destroy();
  });
  t.ok(ended, 'the module ran to its end');
  await t.rejects(thread!.run({ n: 1 }), { message: 'thread destroyed' });

  const missing = new TaskThread<{ n: number }, unknown>(new URL('../no-such-handler.js', import.meta.url).href);
  await missing.destroy();
  t.pass('a thread that never loads does not hold destroy() up');
});

t.test('InlineRunner: tasks sent before the module loads are answered in order; after, each runs inside run()', async (t) => {
  const runner = new InlineRunner<TestTask, unknown>(HANDLER);
  const early = [runner.run({ type: 'echo', n: 1 }), runner.run({ type: 'later', n: 2 }), runner.run({ type: 'echo', n: 3 })];
  const order: number[] = [];
  early.forEach((p) => p.then((a) => order.push((a as { n: number }).n)));
  t.same(await Promise.all(early), [{ n: 1 }, { n: 2 }, { n: 3 }]);
  const bytes = new Uint8Array([1, 2, 3]);
  const answer = runner.run({ type: 'sum', bytes });
  t.same([...((await answer) as { out: Uint8Array }).out], [2, 4, 6]);
  t.equal(bytes.byteLength, 3, 'nothing is moved: the task\'s buffer is still this thread\'s');
  t.same(order.slice(0, 1), [1]);
  await runner.destroy();
});

t.test('InlineRunner: a throwing handler fails its task only; destroy fails waiting and later tasks', async (t) => {
  const runner = new InlineRunner<TestTask, unknown>(HANDLER);
  await t.rejects(runner.run({ type: 'throw' }), { message: 'handler refused' });
  t.same(await runner.run({ type: 'echo', n: 4 }), { n: 4 });
  const waiting = new InlineRunner<TestTask, unknown>(HANDLER);
  const held = t.rejects(waiting.run({ type: 'echo', n: 5 }), { message: 'thread destroyed' });
  await waiting.destroy();
  await held;
  await t.rejects(runner.run({ type: 'echo', n: 6 }).then(() => runner.destroy()).then(() => runner.run({ type: 'echo', n: 7 })), { message: 'thread destroyed' });
});

t.test('InlineRunner: a module that does not load fails the tasks that waited for it', async (t) => {
  const runner = new InlineRunner<TestTask, unknown>(new URL('../no-such-handler.js', import.meta.url).href);
  await t.rejects(runner.run({ type: 'echo', n: 1 }), { message: /Cannot find module/ });
  await t.rejects(runner.run({ type: 'echo', n: 2 }), { message: /Cannot find module/ }, 'and every later one');
});
