// Ending a thread while it loads its module (tests of engine/runtime/task-thread.ts and the local engine): the thread loads
// slow-load-handler.ts, which works for a while and then marks a file.
import type { Test } from 'tap';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

/** A handler module that takes ~300 ms to load. */
export const SLOW_LOAD_HANDLER = new URL('./slow-load-handler.js', import.meta.url).href;

/**
 * Starts threads on SLOW_LOAD_HANDLER with `start` and ends them at once with the function it answers; answers whether
 * the module had run to its end by the time that settled.
 */
export async function loadedBeforeEnd(t: Test, start: () => () => Promise<void>): Promise<boolean> {
  const mark = join(t.testdir(), 'mark');
  process.env.SLOW_LOAD_MARK = mark;
  t.teardown(() => delete process.env.SLOW_LOAD_MARK);
  await start()();
  return existsSync(mark) && readFileSync(mark, 'utf8') === 'loaded';
}
