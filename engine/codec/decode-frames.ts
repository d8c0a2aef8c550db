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
