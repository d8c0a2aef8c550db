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

/**
 * 16 kHz mono PCM of `frames` (one channel: channel-id bytes already taken off), decoded in order; `apart`: on the
 * pool's thread apart (CodecPool.openApart()).
 */
export async function decodeFrames(pool: CodecPool, o: DecodeFramesOptions, frames: readonly Uint8Array[], apart = false): Promise<Int16Array> {
  const params = { sessionId: o.sessionId, codec: o.codec as Codec, sampleRate: o.sampleRate, channels: 1 as const };
  const stream = apart ? pool.openApart(params) : pool.open(params);
  const chunks: Int16Array[] = [];
  stream.on('pcm', (pcm) => {
    if (pcm[0] !== undefined && pcm[0].length > 0) chunks.push(pcm[0].slice()); // a view into the shard's shared answer
  });
  for (const f of frames) stream.push(f);
  await stream.close({ flush: true });
  return concatPcm(chunks);
}

/** Per pool, the last decodeLostFrames() call. */
const turns = new WeakMap<CodecPool, Promise<unknown>>();

/**
 * Batches a dead codec thread lost, decoded again on the pool's thread apart, one call at a time. The batch that
 * ended the thread is among them: it ends only that thread again, and alone, it takes no other batch down with it.
 */
export function decodeLostFrames(pool: CodecPool, o: DecodeFramesOptions, frames: readonly Uint8Array[]): Promise<Int16Array> {
  const mine = (turns.get(pool) ?? Promise.resolve()).catch(() => undefined).then(() => decodeFrames(pool, o, frames, true));
  turns.set(pool, mine);
  return mine;
}
