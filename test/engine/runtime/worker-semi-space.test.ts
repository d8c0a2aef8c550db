import t from 'tap';
import { setWorkerSemiSpace, TaskThread, WORKER_SEMI_SPACE_MB } from '../../../engine/runtime/task-thread.js';
import { busyNewSpace, type TestTask } from '../../helpers/task-thread-handler.js';

// setWorkerSemiSpace changes a process-wide V8 flag, so this test has its own file (tap runs each in its own process).
const HANDLER = new URL('../../helpers/task-thread-handler.js', import.meta.url).href;
const MiB = 1024 * 1024;

async function busyNewSpaceBytes(): Promise<number> {
  const thread = new TaskThread<TestTask, { newSpaceBytes: number }>(HANDLER);
  try {
    return (await thread.run({ type: 'young' })).newSpaceBytes;
  } finally {
    await thread.destroy();
  }
}

t.test('threads started after setWorkerSemiSpace keep a small young generation; the main thread keeps its own', async (t) => {
  const unbounded = await busyNewSpaceBytes();
  t.ok(unbounded > 2 * WORKER_SEMI_SPACE_MB * MiB, `a busy thread grows its new space when nothing bounds it (${unbounded / MiB} MiB)`);

  setWorkerSemiSpace();
  const bounded = await busyNewSpaceBytes();
  t.ok(bounded <= 2 * WORKER_SEMI_SPACE_MB * MiB, `the same work in a thread started after: ${bounded / MiB} MiB of new space (two semi-spaces)`);
  const main = busyNewSpace();
  t.ok(main > 2 * WORKER_SEMI_SPACE_MB * MiB, `the main thread's heap was made before: ${main / MiB} MiB after the same work`);
});
