// A handler module for test/engine/task-thread.test.ts: runs in the thread engine/task-thread.ts starts.
import { moveAnswer } from '../../workers/messages.js';

export type TestTask = { type: 'echo'; n: number } | { type: 'sum'; bytes: Uint8Array } | { type: 'throw' } | { type: 'later'; n: number } | { type: 'exit' } | { type: 'hang' };

export default function handle(task: TestTask): unknown {
  switch (task.type) {
    case 'echo':
      return { n: task.n };
    case 'sum': {
      // Answers a buffer of its own, moved back: the bytes doubled.
      const out = new Uint8Array(task.bytes.length);
      task.bytes.forEach((b, i) => (out[i] = b * 2));
      return moveAnswer({ out }, [out.buffer]);
    }
    case 'throw':
      throw new Error('handler refused');
    case 'later':
      return new Promise((resolve) => setImmediate(() => resolve({ n: task.n })));
    case 'exit':
      process.exit(3);
    case 'hang':
      return new Promise(() => undefined);
  }
}
