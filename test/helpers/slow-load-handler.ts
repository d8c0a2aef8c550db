// A handler module for test/engine/runtime/task-thread.test.ts whose loading takes a while (as a codec shard's, which loads
// native addons, can on a busy machine): it works for LOAD_MS, then writes the file named in SLOW_LOAD_MARK.
import { writeFileSync } from 'node:fs';

const LOAD_MS = 300;
const until = Date.now() + LOAD_MS;
while (Date.now() < until);
const mark = process.env.SLOW_LOAD_MARK;
if (mark !== undefined) writeFileSync(mark, 'loaded');

export default function handle(task: { n: number }): { n: number } {
  return { n: task.n };
}
