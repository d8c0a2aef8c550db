// Decodes stored frames of one channel with a fresh decoder of the session's codec: kept audio read back as PCM.
import { concatPcm } from '../../workers/packing.js';
import type { Codec } from '../../workers/messages.js';
import type { CodecPool } from './pool.js';

export interface DecodeFramesOptions {
  /** Names the stream (the pool's logs and errors). */
  sessionId: string;
  codec: string;
  sampleRate: number;
}

/** 16 kHz mono PCM of `frames` (one channel: channel-id bytes already taken off), decoded in order. */
export async function decodeFrames(pool: CodecPool, o: DecodeFramesOptions, frames: readonly Uint8Array[]): Promise<Int16Array> {
  const stream = pool.open({ sessionId: o.sessionId, codec: o.codec as Codec, sampleRate: o.sampleRate, channels: 1 });
  const chunks: Int16Array[] = [];
  stream.on('pcm', (pcm) => {
    if (pcm[0] !== undefined && pcm[0].length > 0) chunks.push(pcm[0].slice()); // a view into the shard's shared answer
  });
  for (const f of frames) stream.push(f);
  await stream.close({ flush: true });
  return concatPcm(chunks);
}

/** Per pool, the last decodeFramesInTurn() call. */
const turns = new WeakMap<CodecPool, Promise<unknown>>();

/**
 * decodeFrames(), one call per pool at a time: batches a dead codec thread lost, decoded again. The batch that ended
 * the thread is among them; decoded alone, it cannot take another session's batch down with it a second time.
 */
export function decodeFramesInTurn(pool: CodecPool, o: DecodeFramesOptions, frames: readonly Uint8Array[]): Promise<Int16Array> {
  const mine = (turns.get(pool) ?? Promise.resolve()).catch(() => undefined).then(() => decodeFrames(pool, o, frames));
  turns.set(pool, mine);
  return mine;
}
