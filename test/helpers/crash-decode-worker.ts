// A codec shard's worker module for tests of a shard whose thread dies: the real decoder (workers/decode.ts), but a
// decode task that carries CRASH_MESSAGE ends the thread (in a worker thread, process.exit ends that thread only).
import { once } from 'node:events';
import handle, { events } from '../../workers/decode.js';
import type { CodecAnswer, CodecTask } from '../../workers/messages.js';
import { readRecords } from '../../workers/packing.js';
import type { CodecStream } from '../../engine/codec/stream.js';

export { events };

/** The worker's URL, for CodecPoolOptions.filename and ServiceOptions.codecWorker. */
export const CRASH_WORKER = new URL('./crash-decode-worker.js', import.meta.url).href;

/** A message no codec sends: the thread that is given it to decode exits. */
export const CRASH_MESSAGE = new TextEncoder().encode('crash the codec thread');

function carriesCrash(records: Uint8Array): boolean {
  for (const messages of readRecords(records).values()) {
    for (const m of messages) if (m.length === CRASH_MESSAGE.length && m.every((b, i) => b === CRASH_MESSAGE[i])) return true;
  }
  return false;
}

export default function crashingHandle(task: CodecTask): CodecAnswer | Promise<CodecAnswer> {
  if (task.type === 'decodePacked' && carriesCrash(task.records)) process.exit(1);
  return handle(task);
}

/**
 * Ends the thread of `stream`'s shard (a pool started with CRASH_WORKER): resolves once the stream lost the task that
 * carried the crash, by then a new thread is starting and the shard's sockets are reported lost.
 */
export async function crashShardOf(stream: CodecStream): Promise<void> {
  const lost = once(stream, 'failure');
  stream.push(CRASH_MESSAGE);
  await lost;
}
