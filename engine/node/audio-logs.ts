// A listen node's acknowledged audio: the audio logs under DATA_DIR, the writer's heartbeat in Redis, and the sweep
// that hands a dead connection's audio to kept audio and deletes logs past their retention.
import { randomUUID } from 'node:crypto';
import type client from 'prom-client';
import type { Services } from '../services.js';
import type { Scheduler } from '../scheduler.js';
import type { CodecPool } from '../codec/pool.js';
import type { KeptAudioJobs } from '../jobs/kept-audio-jobs.js';
import type { KeptAudioStore } from '../stt/kept-audio.js';
import { LISTEN } from '../protocol.js';
import { decodeFrames } from '../codec/decode-frames.js';
import { LocalAudioLogStore, type AudioLogStore } from '../listen/audio-log.js';
import { DurableAudio } from '../listen/durable-audio.js';
import { AudioLogSweep, SWEEP_INTERVAL_MS, type LogHandOver } from '../listen/audio-log-sweep.js';
import { registerAudioLogMetrics } from './metrics.js';

/** A writer whose heartbeat is this old is dead: its unfinished connections are handed over. */
const HEARTBEAT_TTL_MS = 10_000;
const HEARTBEAT_EVERY_MS = 2_000;
/** How long a hand-over stays claimed by the process that took it. */
const CLAIM_TTL_S = 7 * 86400;

export interface AudioLogsOptions {
  services: Services;
  registry: client.Registry;
  scheduler: Scheduler;
  pool: CodecPool;
  kept: KeptAudioStore;
  keptJobs: () => KeptAudioJobs | undefined;
  /** @defaultValue the local directory DATA_DIR/audio-log */
  store?: AudioLogStore;
}

export interface AudioLogs {
  readonly durable: DurableAudio;
  readonly sweep: AudioLogSweep;
  /** After the sessions drained: the last records written, the heartbeat gone. */
  close(): Promise<void>;
}

export function startAudioLogs(o: AudioLogsOptions): AudioLogs {
  const { config, clock, logger, redis, conversations, lifecycle } = o.services;
  const metrics = registerAudioLogMetrics(o.registry);
  const store = o.store ?? new LocalAudioLogStore(config.dataDir);
  const writer = randomUUID();
  const key = (w: string): string => `${config.redisPrefix}:audio-log:writer:${w}`;
  // Liveness is real time, not the injected clock: another node reads it from Redis.
  const beat = (): void => void redis.set(key(writer), '1', 'PX', HEARTBEAT_TTL_MS).catch(() => undefined);
  beat();
  const heartbeat = setInterval(beat, HEARTBEAT_EVERY_MS);
  heartbeat.unref();
  let sweep: AudioLogSweep | undefined;
  const durable = new DurableAudio({
    store,
    clock,
    scheduler: o.scheduler,
    logger,
    writer,
    maxSessionBytes: config.audioLogMaxSessionBytes,
    maxNodeBytes: config.audioLogMaxNodeBytes,
    retainedBytes: () => sweep?.retainedBytes ?? 0,
    metrics: {
      ackLatencyS: (s) => metrics.ackLatency.observe(s),
      gapSeconds: (s) => metrics.gapSeconds.inc(s),
      full: (scope) => metrics.full.inc({ scope }),
    },
  });
  const keep = async (h: LogHandOver): Promise<void> => {
    const { header } = h;
    const channels = header.channels === 2 ? [0, 1].map((ch) => h.frames.filter((f) => f[0] === ch + 1).map((f) => f.subarray(1))) : [h.frames];
    for (const [channel, frames] of channels.entries()) {
      if (frames.length === 0) continue;
      const sessionId = `${header.sessionId}-e${h.epoch}`;
      const pcm = await decodeFrames(o.pool, { sessionId: `${sessionId}:log`, codec: header.codec, sampleRate: header.sampleRate }, frames);
      const meta = { uid: header.uid, conversationId: h.conversationId, sessionId, language: header.language, channel, channels: header.channels, offsetS: h.offsetS, sampleRateHz: 16000 as const, createdAtMs: clock.now() };
      const keptId = await o.kept.keep(meta, [pcm]);
      await o.keptJobs()?.add({ conversationId: h.conversationId, uid: header.uid, keptId });
    }
    // Its session's node died: nothing else will end the conversation once the audio is in.
    await lifecycle.leftInProgress(h.conversationId, header.uid, LISTEN.conversationTimeoutDefaultS);
  };
  sweep = new AudioLogSweep({
    store,
    logger,
    now: () => clock.now(),
    writer,
    retentionMs: config.audioLogRetentionS * 1000,
    isOpen: (id) => durable.isOpen(id),
    liveIndex: (name) => durable.liveIndex(name),
    currentSegment: () => durable.currentSegment,
    removedOwn: (bytes) => durable.removedOwn(bytes),
    writerAlive: async (w) => w === writer || (await redis.exists(key(w))) === 1,
    claim: async (id, epoch) => {
      const k = `${config.redisPrefix}:audio-log:claim:${id}:${epoch}`;
      return (await redis.set(k, writer, 'EX', CLAIM_TTL_S, 'NX')) === 'OK' || (await redis.get(k)) === writer;
    },
    conversations: { getById: (id) => conversations.getById(id), segments: (id) => conversations.segments(id) },
    openConversation: async (h, startedAtMs) => (await lifecycle.open(h.uid, h.source, h.language, startedAtMs)).id,
    keep,
    metrics: { handedOverSeconds: (s) => metrics.handedOverSeconds.inc(s), removed: (reason) => metrics.removed.inc({ reason }) },
  });
  const s = sweep;
  void s.run();
  const timer = o.scheduler.every(SWEEP_INTERVAL_MS, () => s.run());
  return {
    durable,
    sweep: s,
    async close() {
      o.scheduler.cancel(timer);
      clearInterval(heartbeat);
      await durable.close();
      await redis.del(key(writer)).catch(() => undefined);
    },
  };
}
