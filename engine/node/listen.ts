// The listen node: /v4/listen on the HTTP server, its session registry and admission, the codec shards, and the
// main thread's loop pacing. Every role has the registry (session events reach it); only listen roles take sessions.
import { performance } from 'node:perf_hooks';
import type uWS from 'uWebSockets.js';
import type client from 'prom-client';
import type { Services } from '../services.js';
import type { Scheduler } from '../scheduler.js';
import type { KeptAudioJobs } from '../jobs/kept-audio-jobs.js';
import type { KeptAudioStore } from '../stt/kept-audio.js';
import type { EngineList } from '../stt/engine-list.js';
import type { Authenticator } from '../identity/authenticator.js';
import type { Tuning } from './tuning.js';
import { ActorRegistry } from '../listen/actor-registry.js';
import { SessionActor } from '../listen/session-actor.js';
import { attachListen } from '../listen/uws-server.js';
import { BATCH_WINDOW_MS, CodecPool, INLINE_BUSY_PCT } from '../codec/pool.js';
import { DecodeOverload } from '../codec/overload.js';
import { MainLoad, type LoopTimes } from '../runtime/main-load.js';
import { LOOP_PACE_MS, LoopPacer, PACER_LOOK_MS } from '../runtime/loop-pacer.js';
import { registerCodecMetrics, registerListenMetrics, registerLiveWebhookMetrics, registerPacerMetrics, registerSessionMetrics, registerTranslationMetrics, registerSpeakerIdMetrics } from './metrics.js';
import { Translator } from '../translation/translator.js';
import { LiveTranslation } from '../translation/live.js';
import { webhookParts } from '../webhooks/parts.js';
import { deliveryClient } from '../webhooks/attempt.js';
import { LiveWebhooks } from '../webhooks/live.js';
import type { AppReplyHandler } from '../webhooks/live-send.js';
import type { LiveDeliveryLog } from '../webhooks/types.js';
import { AppRepliesRepository } from '../db/app-replies.js';
import { startAudioLogs, type AudioLogs } from './audio-logs.js';
import { Slots } from '../runtime/slots.js';
import { CLIPS_AT_ONCE } from '../listen/speaker-id.js';

/** The largest backlog a session's socket may hold towards its client before it is closed. */
const MAX_OUTBOUND_BYTES = 4 * 1024 * 1024;

/** This node's sessions and the admission that refuses new ones while the node is past what it serves in time. */
export interface Sessions {
  readonly actors: ActorRegistry;
  readonly overload: DecodeOverload;
}

/** Builds the session registry with its admission (decode delay and store backlog) and its metrics. */
export function createSessions(s: Services, registry: client.Registry): Sessions {
  const { config, logger, conversations, clock } = s;
  const overload = new DecodeOverload({
    thresholdS: config.listenShedDecodeDelayMs / 1000,
    clock,
    onChange: (on, delayS) =>
      on
        ? logger.warn({ decodeDelayMs: Math.round(delayS * 1000), thresholdMs: config.listenShedDecodeDelayMs }, 'live audio waits on decoding: refusing new sessions')
        : logger.info({ decodeDelayMs: Math.round(delayS * 1000) }, 'decoding keeps up again: taking new sessions'),
  });
  // The store falling behind: read at each new session (no timer); a log line when it starts and when it ends.
  let storeBehind = false;
  const storeOverloaded = (): boolean => {
    const threshold = config.listenShedStoreDelayMs;
    if (threshold <= 0) return false;
    const backlogMs = conversations.tailWriteBacklogMs();
    const behind = backlogMs >= threshold;
    if (behind !== storeBehind) {
      storeBehind = behind;
      if (behind) logger.warn({ backlogMs: Math.round(backlogMs), thresholdMs: threshold }, 'transcript writes wait on the store: refusing new sessions');
      else logger.info({ backlogMs: Math.round(backlogMs) }, 'the store keeps up again: taking new sessions');
    }
    return behind;
  };
  let actors: ActorRegistry | undefined;
  const { shed } = registerSessionMetrics(registry, {
    sessions: () => actors?.size ?? 0,
    draining: () => actors?.draining ?? 0,
    tailWriteBacklogMs: () => conversations.tailWriteBacklogMs(),
    tailWritesPending: () => conversations.tailWritesPending(),
    maxSessions: config.maxSessions,
  });
  actors = new ActorRegistry({
    maxSessions: config.maxSessions,
    maxSessionsPerUser: config.maxSessionsPerUser,
    overloaded: () => overload.overloaded || storeOverloaded(),
    onShed: () => shed.inc(),
    conversations,
    logger,
  });
  return { actors, overload };
}

export interface ListenNodeOptions {
  readonly services: Services;
  readonly registry: client.Registry;
  readonly app: uWS.TemplatedApp;
  readonly authenticator: Authenticator;
  readonly sessions: Sessions;
  readonly scheduler: Scheduler;
  readonly stt: EngineList;
  readonly kept: KeptAudioStore;
  readonly keptJobs: () => KeptAudioJobs | undefined;
  readonly tuning: Tuning;
  /** The codec shards' worker module (tests point it at a fixture). */
  readonly codecWorker?: string;
  /** Where live webhook batches given up on are recorded for their owners; without it only the metrics count them. */
  readonly liveDeliveryLog?: LiveDeliveryLog;
  /** Handed each stored reply of a live transcript endpoint (a push or a proactive notification to make). */
  readonly onAppReply?: AppReplyHandler;
}

/** What a listen node runs, for shutdown. */
export interface ListenNode {
  readonly codecPool: CodecPool;
  readonly pacer: LoopPacer | undefined;
  readonly liveWebhooks: LiveWebhooks;
  /** ack=enabled sessions' audio logs. */
  readonly audioLogs: AudioLogs;
}

/** Attaches /v4/listen and starts the codec shards. */
export function startListenNode(o: ListenNodeOptions): ListenNode {
  const { services: s, registry, scheduler, tuning } = o;
  const { config, clock, logger } = s;
  const metrics = registerListenMetrics(registry);
  // One child per codec shard and per provider, made on first use and kept.
  const decodeDelays = new Map<string, client.Histogram.Internal<'shard'>>();
  const resultLags = new Map<string, client.Histogram.Internal<'provider'>>();
  const sttMetrics = {
    openFailed: (provider: string, reason: string) => metrics.sttOpenFailures.inc({ provider, reason }),
    resultLag: (provider: string) => {
      let child = resultLags.get(provider);
      if (!child) resultLags.set(provider, (child = metrics.sttResultLag.labels(provider)));
      return child;
    },
  };
  const paceMs = tuning.loopPaceMs ?? LOOP_PACE_MS;
  const pacer = paceMs > 0 ? new LoopPacer({ intervalMs: paceMs }) : undefined;
  if (pacer) {
    scheduler.every(PACER_LOOK_MS, () => pacer.look());
    registerPacerMetrics(registry, pacer);
  }
  // The busy share leaves out the pacer's sleeps: the loop was waiting for frames then, not working.
  const loopTimes = (): LoopTimes => {
    const u = performance.eventLoopUtilization();
    const slept = pacer?.sleptMs ?? 0;
    return { idle: u.idle + slept, active: Math.max(0, u.active - slept) };
  };
  const inlineBusyPct = tuning.inlineBusyPct ?? INLINE_BUSY_PCT;
  const mainLoad = inlineBusyPct > 0 ? new MainLoad({ limit: inlineBusyPct / 100, clock, read: loopTimes }) : undefined;
  const pool = new CodecPool({
    ...(config.codecThreads > 0 ? { threads: config.codecThreads } : {}),
    batchWindowMs: tuning.codecBatchMs ?? BATCH_WINDOW_MS,
    onTaskDelay: (delayS, shard) => {
      let child = decodeDelays.get(shard);
      if (!child) decodeDelays.set(shard, (child = metrics.decodeDelay.labels(shard)));
      child.observe(delayS);
      o.sessions.overload.observe(delayS);
    },
    ...(o.codecWorker ? { filename: o.codecWorker } : {}),
    ...(mainLoad ? { inline: (sessions: number) => mainLoad.admit(sessions) } : {}),
  });
  registerCodecMetrics(registry, pool);
  const speakerId = { voiceprints: s.voiceprints, embeddings: () => s.speakerEmbeddings, clipSlots: new Slots(CLIPS_AT_ONCE), metrics: registerSpeakerIdMetrics(registry) };
  const actors = o.sessions.actors;
  const parts = webhookParts(s);
  const liveWebhooks = new LiveWebhooks({
    context: { guard: parts.guard, clock, scheduler, logger, metrics: registerLiveWebhookMetrics(registry), client: deliveryClient(parts.guard), replies: new AppRepliesRepository(s.store.knex), log: o.liveDeliveryLog, onAppReply: o.onAppReply },
    webhooks: parts.webhooks,
    secrets: parts.secrets,
  });
  // Translation of multilingual sessions needs the language model; without one it is off (and `ready` says so).
  const translation = config.llmBaseUrl
    ? new LiveTranslation({
        translator: new Translator({ baseUrl: config.llmBaseUrl, apiKey: config.llmApiKey, model: config.llmModel, clientTimeoutMs: config.llmTimeoutMs, scheduler, logger, counters: registerTranslationMetrics(registry) }),
        settings: s.userSettings,
        store: s.conversations,
        scheduler,
        clock,
        logger,
      })
    : undefined;
  const audioLogs = startAudioLogs({ services: s, registry, scheduler, pool, kept: o.kept, keptJobs: o.keptJobs });
  attachListen(o.app, {
    authenticator: o.authenticator,
    registry: actors,
    logger,
    ...(pacer ? { pacer } : {}),
    onOversized: (kind, outcome) => metrics.oversized.inc({ kind, outcome }),
    createActor: ({ sessionId, params, socket }) =>
      new SessionActor({
        sessionId,
        params,
        socket,
        scheduler,
        clock,
        logger,
        codecPool: pool,
        stt: o.stt,
        lifecycle: s.lifecycle,
        conversations: s.conversations,
        maxInboundBytes: config.listenMaxInboundBytes,
        maxOutboundBytes: MAX_OUTBOUND_BYTES,
        onClosed: (actor) => actors.remove(actor),
        ...(config.customSttUrl ? { customSttUrl: config.customSttUrl } : {}),
        usage: s.usageRecorder,
        sttMetrics,
        onProviderFailure: (provider, reason, keptS) => {
          metrics.sttFailures.inc({ provider, reason });
          if (keptS > 0) metrics.keptSeconds.inc({ provider }, keptS);
        },
        onFlushFailed: () => metrics.flushFailures.inc(),
        onTranscriptLost: (items) => metrics.transcriptLost.inc(items),
        keepAudio: async (meta, chunks) => o.keptJobs()?.add({ conversationId: meta.conversationId, uid: meta.uid, keptId: await o.kept.keep(meta, chunks) }),
        liveWebhooks: liveWebhooks.session(params.uid, sessionId),
        ...(translation ? { translation } : {}),
        ...(params.ack ? { audioLog: audioLogs.durable.connection({ sessionId, uid: params.uid, codec: params.codec, sampleRate: params.sampleRate, channels: params.channels, language: params.language, source: params.source, ...(params.resume ? { resume: params.resume } : {}) }) } : {}),
        speakerId,
      }),
  });
  return { codecPool: pool, pacer, liveWebhooks, audioLogs };
}
