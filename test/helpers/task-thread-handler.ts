// A handler module for test/engine/runtime/task-thread.test.ts: runs in the thread engine/runtime/task-thread.ts starts.
import { getHeapSpaceStatistics } from 'node:v8';
import { moveAnswer } from '../../workers/messages.js';

export type TestTask = { type: 'echo'; n: number } | { type: 'sum'; bytes: Uint8Array } | { type: 'throw' } | { type: 'later'; n: number } | { type: 'exit' } | { type: 'hang' } | { type: 'young' };

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
    case 'young':
      return { newSpaceBytes: busyNewSpace() };
  }
}

/**
 * Allocates like a busy thread whose objects live a little while (a few in fifty outlive several scavenges), which
 * makes V8 grow the young generation as far as it may, and answers the new space's size.
 */
export function busyNewSpace(): number {
  const kept: unknown[][] = [];
  for (let i = 0; i < 1000; i++) {
    const batch: unknown[] = [];
    for (let j = 0; j < 2000; j++) batch.push({ j, s: `x${j}` });
    if (i % 50 === 0) kept.push(batch);
    if (kept.length > 10) kept.shift();
  }
  return getHeapSpaceStatistics().find((s) => s.space_name === 'new_space')!.space_size;
}
