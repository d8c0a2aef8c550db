import t from 'tap';
import { TaskThread } from '../../engine/task-thread.js';
import type { TestTask } from '../helpers/task-thread-handler.js';

const HANDLER = new URL('../helpers/task-thread-handler.js', import.meta.url).href;

t.test('answers tasks, sync and async, and moves buffers both ways', async (t) => {
  const thread = new TaskThread<TestTask, unknown>(HANDLER);
  t.teardown(() => thread.destroy());
  const bytes = new Uint8Array([1, 2, 3, 100]);
  const [a, b, c] = await Promise.all([thread.run({ type: 'later', n: 1 }), thread.run({ type: 'echo', n: 2 }), thread.run({ type: 'sum', bytes }, [bytes.buffer])]);
  t.same(a, { n: 1 });
  t.same(b, { n: 2 });
  t.same([...(c as { out: Uint8Array }).out], [2, 4, 6, 200], 'the answer carries the moved buffer');
  t.equal(bytes.byteLength, 0, 'the task buffer was moved, not copied');
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
