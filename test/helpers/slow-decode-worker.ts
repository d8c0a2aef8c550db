// A codec shard's worker module for tests of an overloaded node: the real decoder (workers/decode.ts), but every decode
// task first keeps the thread busy for SLOW_DECODE_MS (workerData cannot carry it: the task thread's own data is its
// module's name), so the audio of every task waits at least that long, as on a node past its capacity.
import handle, { events } from '../../workers/decode.js';
import type { CodecAnswer, CodecTask } from '../../workers/messages.js';

export { events };

const busyMs = Number(process.env.SLOW_DECODE_MS ?? 50);

export default function slowHandle(task: CodecTask): CodecAnswer | Promise<CodecAnswer> {
  if (task.type === 'decodePacked') {
    const until = performance.now() + busyMs;
    while (performance.now() < until) {
      // busy, as a saturated thread is
    }
  }
  return handle(task);
}
