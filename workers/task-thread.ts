// Entry of a task thread (a codec shard, a speech thread, the built-in processor; engine/runtime/task-thread.ts starts
// it): loads the handler module named in workerData and answers each `{ id, task }` with `{ id, answer }`, moving the
// buffers the handler marked (workers/messages.ts).
//
// Rationale: each such thread has one caller, so a pool's queueing, async-resource and balancing work per task is not
// needed; this loop is all that is. Tasks run as they arrive: an async handler (a speech thread waiting on its VAD)
// lets the next task start while it waits.
import { writeFileSync } from 'node:fs';
import { parentPort, workerData } from 'node:worker_threads';
import { movesOf } from './messages.js';

export interface ThreadRequest {
  id: number;
  task: unknown;
}

/**
 * An answer to task `id`, an event the handler module sent on its own (its `events` export), or word that the handler
 * module has loaded (sent once, before any answer).
 */
export type ThreadReply = { id: number; answer: unknown } | { id: number; error: string } | { event: unknown } | { loaded: true };

type Handler = (task: unknown) => unknown;

const port = parentPort;
if (port === null) throw new Error('workers/task-thread.js runs in a worker thread');
const { filename } = workerData as { filename: string };
// Named after its handler (`task-decode`, at most 15 bytes), so that per-thread CPU in /proc/<pid>/task/*/stat tells
// the threads apart (Node names none); best effort: not Linux, no name.
try {
  writeFileSync('/proc/thread-self/comm', `task-${(/([^/]+?)(\.[jt]s)?$/.exec(filename)?.[1] ?? 'thread')}`.slice(0, 15));
} catch {
  // not Linux
}
const mod = (await import(filename)) as { default: Handler; events?: (listener: (event: unknown) => void) => unknown };
const handle = mod.default;
// A module with something to say between answers (a codec shard's provider sockets) gets a channel for it.
mod.events?.((event) => port.postMessage({ event } satisfies ThreadReply));
// From here the thread may be terminated safely: its native addons are loaded (engine/runtime/task-thread.ts destroy()).
port.postMessage({ loaded: true } satisfies ThreadReply);

function reply(id: number, answer: unknown): void {
  port!.postMessage({ id, answer } satisfies ThreadReply, movesOf(answer));
}

function replyError(id: number, err: unknown): void {
  port!.postMessage({ id, error: err instanceof Error ? err.message : String(err) } satisfies ThreadReply);
}

port.on('message', ({ id, task }: ThreadRequest) => {
  let answer: unknown;
  try {
    answer = handle(task);
  } catch (err) {
    replyError(id, err);
    return;
  }
  if (answer instanceof Promise) answer.then((a) => reply(id, a), (err: unknown) => replyError(id, err));
  else reply(id, answer);
});
