// Composition root: wires config, store, Redis, identity and routes into one running service, and takes it down gracefully.
// Over 15 KB because shutdown's ordered steps belong beside what start-up opened; the nodes live in engine/node/.
import { performance } from 'node:perf_hooks';
import client from 'prom-client';
import { ConfigError, type Config } from './config.js';
import { systemClock, type Clock } from './clock.js';
import { createLogger, type Logger } from './logger.js';
import { openStore, storeOptions, type Store } from './db/store.js';
import { UsersRepository } from './db/users.js';
import { ApiKeysRepository } from './db/api-keys.js';
import { ConversationsRepository } from './db/conversations.js';
import { FoldersRepository } from './db/folders.js';
import { MemoriesRepository } from './db/memories.js';
import { ActionItemsRepository } from './db/action-items.js';
import { GoalsRepository } from './db/goals.js';
import { UsageRepository } from './db/usage.js';
import { UsageRecorder } from './stt/usage.js';
import { createProcessor } from './processing/index.js';
import { createRedis, resolveRedis, type EmbeddedRedis, type RedisClient } from './redis.js';
import { LocalIssuer, remoteVerifier, type IdTokenVerifier } from './identity/id-tokens.js';
import { Authenticator, type Principal } from './identity/authenticator.js';
import { HttpAdapter, type Route } from '../http/adapter.js';
import type { Services } from './services.js';
import { DataVersions } from './cache/data-versions.js';
import { Scheduler } from './scheduler.js';
import { MALLOC_TRIM_INTERVAL_S, startMemoryTrim } from './runtime/memory-trim.js';
import { HEAP_COMPACT_INTERVAL_S, startHeapCompaction, type HeapCompaction } from './runtime/heap-compaction.js';
import { CodecPool } from './codec/pool.js';
import type { SttEngine } from './stt/types.js';
import { createSttEngines } from './stt/engines.js';
import { EngineList } from './stt/engine-list.js';
import { KeptAudioStore } from './stt/kept-audio.js';
import { KeptAudioIndex, KeptAudioJobs } from './jobs/kept-audio-jobs.js';
import { ProcessingQueue, within } from './jobs/queues.js';
import { SessionEvents } from './jobs/session-events.js';
import { ProcessConversationWorker } from './jobs/process-conversation.js';
import { ConversationLifecycle } from './conversations/lifecycle.js';
import { ActorRegistry } from './listen/actor-registry.js';
import { CloseCode } from './protocol.js';
import type { LoopPacer } from './runtime/loop-pacer.js';
import { registerProcessMetrics, registerRetentionMetrics, registerSyncMetrics, registerVoiceMetrics } from './node/metrics.js';
import { Retention, RETENTION_INTERVAL_MS, retentionRules } from './db/retention.js';
import { Accounts } from './identity/accounts.js';
import { DeletedAccounts } from './db/accounts.js';
import type { NamedQueue } from './jobs/queue-metrics.js';
import { VoiceTranscriber } from './voice/transcriber.js';
import { FileDecoder } from './voice/file-decoder.js';
import { SpeechCheck } from './voice/speech-check.js';
import { voiceEngines } from './voice/engines.js';
import { createSessions, startListenNode, type ListenNode } from './node/listen.js';
import { createApiNode } from './node/api.js';
import { startJobsNode } from './node/jobs.js';
import type { Tuning } from './node/tuning.js';
import { WebhookQueue } from './webhooks/queue.js';
import { WebhookWorker } from './webhooks/worker.js';
import { webhookParts } from './webhooks/parts.js';
import { conversationCreatedListener } from './webhooks/conversation-created.js';
import type { Resolver } from './webhooks/destination.js';
import { UserSettingsRepository } from './db/user-settings.js';
import { NotificationsRepository } from './db/notifications.js';
import { Notifier } from './notifications/notifier.js';
import { startPushes, type Pushes } from './notifications/pushes.js';
import type { LiveWebhooks } from './webhooks/live.js';
import type { AudioLogs } from './node/audio-logs.js';
import { daySummaries } from './summaries/day-summary.js';
import { DaySummarySchedule } from './summaries/schedule.js';
import type { AppReplyHandler } from './webhooks/live-send.js';
import { ProactiveNotifications } from './notifications/proactive.js';
import type { LiveDeliveryLog } from './webhooks/types.js';
import { SyncRepository } from './db/sync-jobs.js';
import { SyncBatches } from './sync/batch.js';
import { SyncQueue, SyncWorker } from './sync/jobs.js';
import { UPLOAD_SWEEP_INTERVAL_MS, UploadStore } from './sync/uploads.js';
import { createEmbeddingService, type ThreadEmbeddingService } from './speakers/embedding-service.js';
import { Voiceprints } from './db/voiceprints.js';

export type { Tuning } from './node/tuning.js';

export interface ServiceOptions {
  readonly config: Config;
  readonly clock?: Clock;
  readonly logger?: Logger;
  /** Routes added after the built-in ones (tests and embedders). */
  readonly extraRoutes?: (services: Services) => Route<Principal>[];
  /**
   * STT engines for live sessions, in preference order (a session's `stt_service` may pick one by name).
   * @defaultValue the `local` engine (PocketSphinx, English) behind the speech gate when VAD_GATE is on
   */
  readonly sttEngines?: readonly SttEngine[];
  /** The codec shards' worker module (CodecPoolOptions.filename); tests point it at a fixture. @defaultValue dist/workers/decode.js */
  readonly codecWorker?: string;
  /**
   * How often the process-wide scheduler walks due timers, in milliseconds; 0 leaves it to `service.scheduler.tick()`
   * (tests driving a ManualClock).
   * @defaultValue 50
   */
  readonly schedulerResolutionMs?: number;
  /** Overrides of the live path's tuning constants, for tests that exercise one of them; never read from the environment. */
  readonly tuning?: Tuning;
  /** Resolves webhook destinations' host names (tests); @defaultValue the system resolver */
  readonly webhookResolver?: Resolver;
  /** Also handed each stored reply of a live transcript endpoint, before the proactive notifications act on it (tests). @defaultValue none */
  readonly onAppReply?: AppReplyHandler;
  /** Where live webhook batches given up on are recorded for their owners. @defaultValue the delivery log */
  readonly liveDeliveryLog?: LiveDeliveryLog;
}

/** The live path's parts; present on every node, the socket and worker only for the roles that run them. */
interface LiveParts {
  scheduler: Scheduler;
  queue: ProcessingQueue;
  events: SessionEvents;
  registry: ActorRegistry;
  stt: EngineList;
  codecPool: CodecPool | undefined;
  worker: ProcessConversationWorker | undefined;
  webhookQueue: WebhookQueue;
  webhookWorker: WebhookWorker | undefined;
  keptJobs: KeptAudioJobs | undefined;
  compaction: HeapCompaction | undefined;
  pacer: LoopPacer | undefined;
  pushes: Pushes;
  liveWebhooks: LiveWebhooks | undefined;
  audioLogs: AudioLogs | undefined;
  proactive: ProactiveNotifications | undefined;
  daySummarySchedule: DaySummarySchedule | undefined;
  syncQueue: SyncQueue;
  syncWorker: SyncWorker | undefined;
  fileDecoder: FileDecoder | undefined;
}


/** Builds the ID-token verifier the configuration asks for. */
export async function createVerifier(config: Config, clock: Clock): Promise<IdTokenVerifier> {
  const opts = { issuer: config.idTokenIssuer, audience: config.idTokenAudience, clockToleranceS: config.idTokenClockToleranceS, clock };
  return config.idTokenJwksUrl ? remoteVerifier(config.idTokenJwksUrl, opts) : LocalIssuer.open(config.dataDir, opts);
}

export class Service {
  readonly config: Config;
  readonly logger: Logger;
  readonly services: Services;
  readonly http: HttpAdapter<Principal>;
  port = 0;
  #embedded: EmbeddedRedis | undefined;
  #subscriber: RedisClient;
  #stopping: Promise<void> | undefined;
  #stopStep = '';
  readonly #failedSteps: string[] = [];
  readonly #live: LiveParts;

  private constructor(services: Services, http: HttpAdapter<Principal>, subscriber: RedisClient, embedded: EmbeddedRedis | undefined, live: LiveParts) {
    this.#live = live;
    this.services = services;
    this.config = services.config;
    this.logger = services.logger;
    this.http = http;
    this.#subscriber = subscriber;
    this.#embedded = embedded;
  }

  /** The process-wide timer of every session actor (tests call `tick()` after moving the clock). */
  get scheduler(): Scheduler {
    return this.#live.scheduler;
  }

  /** This node's live sessions. */
  get sessions(): ActorRegistry {
    return this.#live.registry;
  }

  /** The codec shards of a listen node. */
  get codecPool(): CodecPool | undefined {
    return this.#live.codecPool;
  }

  /** The ack=enabled sessions' audio logs on a listen node. */
  get audioLogs(): AudioLogs | undefined {
    return this.#live.audioLogs;
  }

  /** The day summary's schedule on a jobs node (tests run an hour with `runHour`). */
  get daySummarySchedule(): DaySummarySchedule | undefined {
    return this.#live.daySummarySchedule;
  }

  /** Opens every dependency, runs migrations and starts listening. */
  static async start(opts: ServiceOptions): Promise<Service> {
    const { config } = opts;
    const clock = opts.clock ?? systemClock;
    const logger = opts.logger ?? createLogger(config.logLevel);
    const { url: redisUrl, embedded } = await resolveRedis(config, logger);
    const store: Store = openStore(storeOptions(config));
    const redis = createRedis(redisUrl);
    // A subscriber's connection waits for messages, not answers: no command timeout.
    const subscriber = createRedis(redisUrl, { commandTimeout: undefined });
    redis.on('error', () => undefined);
    subscriber.on('error', () => undefined);
    const scheduler = new Scheduler({ clock, resolutionMs: opts.schedulerResolutionMs ?? 50, onError: (err) => logger.error({ err: { name: (err as Error)?.name } }, 'scheduled task failed') });
    const queue = new ProcessingQueue({ redisUrl, prefix: config.redisPrefix });
    const syncQueue = new SyncQueue({ redisUrl, prefix: config.redisPrefix });
    const webhookQueue = new WebhookQueue({ redisUrl, prefix: config.redisPrefix, knex: store.knex, now: () => clock.now(), logger });
    const events = new SessionEvents({ publisher: redis, subscriber, channel: `${config.redisPrefix}:listen:events` });
    const runsListen = config.role === 'all' || config.role === 'listen';
    const runsJobs = config.role === 'all' || config.role === 'jobs';
    let codecPool: CodecPool | undefined;
    let worker: ProcessConversationWorker | undefined;
    let webhookWorker: WebhookWorker | undefined;
    let keptJobs: KeptAudioJobs | undefined;
    let compaction: HeapCompaction | undefined;
    let pacer: LoopPacer | undefined;
    let listen: ListenNode | undefined;
    let pushes: Pushes | undefined;
    let proactive: ProactiveNotifications | undefined;
    let daySummarySchedule: DaySummarySchedule | undefined;
    let syncWorker: SyncWorker | undefined;
    let fileDecoder: FileDecoder | undefined;
    let speakerEmbeddings: ThreadEmbeddingService | undefined;
    try {
      const applied = await store.migrate();
      if (applied.length > 0) logger.info({ migrations: applied.length, dialect: store.dialect }, 'migrations applied');
      const registry = new client.Registry();
      const namedQueues = (): NamedQueue[] => [
        { name: 'processing', queue: queue.queue },
        { name: 'webhooks', queue: webhookQueue.queue },
        { name: 'sync', queue: syncQueue.queue },
        ...(keptJobs ? [{ name: 'transcribe_kept_audio', queue: keptJobs.queue }] : []),
        ...(pushes?.queue ? [{ name: 'notifications', queue: pushes.queue.queue }] : []),
        ...(daySummarySchedule ? [{ name: 'day_summaries', queue: daySummarySchedule.queue }] : []),
      ];
      registerProcessMetrics(registry, namedQueues, { role: config.role });
      startMemoryTrim({ scheduler, registry, intervalS: opts.tuning?.mallocTrimIntervalS ?? MALLOC_TRIM_INTERVAL_S });
      compaction = startHeapCompaction({ scheduler, registry, intervalS: opts.tuning?.heapCompactIntervalS ?? HEAP_COMPACT_INTERVAL_S, tidyThreads: () => codecPool?.tidyThreads() ?? 0 });
      const apiKeys = new ApiKeysRepository(store.knex);
      const versions = new DataVersions({ redis, prefix: config.redisPrefix, logger });
      const users = new UsersRepository(store.knex, versions);
      const conversations = new ConversationsRepository(store.knex, () => clock.now());
      const keptIndex = new KeptAudioIndex(redis, config.redisPrefix);
      const lifecycle = new ConversationLifecycle({ conversations, users, clock, logger, queue, events, memoryAccessDefault: config.memoryAccessDefault === 'enabled', keptAudio: keptIndex });
      const deletedAccounts = new DeletedAccounts(store.knex);
      const authenticator = new Authenticator({
        verifier: await createVerifier(config, clock),
        keys: apiKeys,
        clock,
        logger,
        lastUsedIntervalMs: config.keyLastUsedIntervalS * 1000,
        cacheTtlMs: config.keyCacheTtlS * 1000,
        idTokenCacheMs: config.idTokenCacheS * 1000,
        revocationChannel: `${config.redisPrefix}:api-keys:revoked`,
        deletedAccounts,
      });
      await authenticator.attach(redis, subscriber);
      const usage = new UsageRepository(store.knex);
      const userSettings = new UserSettingsRepository(store.knex);
      const notifications = new NotificationsRepository(store.knex);
      pushes = startPushes({ config, redisUrl, clock, logger, notifications, settings: userSettings, consume: runsJobs, registry });
      const notifier = new Notifier({ notifications, settings: userSettings, publisher: redis, subscriber, channel: `${config.redisPrefix}:notifications`, pushes: pushes.queue, clock, logger });
      await notifier.attach();
      const stt = new EngineList(opts.sttEngines ?? createSttEngines(config, { clock, scheduler, logger, sendMs: opts.tuning?.sttSendMs }));
      const syncRepo = new SyncRepository(store.knex);
      const syncMetrics = registerSyncMetrics(registry);
      const uploads = new UploadStore(config.dataDir);
      fileDecoder = new FileDecoder();
      speakerEmbeddings = await startSpeakerEmbeddings(config, logger);
      const services: Services = {
        config,
        clock,
        logger,
        store,
        redis,
        registry,
        users,
        apiKeys,
        authenticator,
        conversations,
        folders: new FoldersRepository(store.knex),
        processor: await createProcessor(config, logger, { thread: true }),
        memories: new MemoriesRepository(store.knex, store.dialect, versions),
        actionItems: new ActionItemsRepository(store.knex, versions),
        goals: new GoalsRepository(store.knex, store.dialect, versions),
        lifecycle,
        usage,
        usageRecorder: new UsageRecorder({ repository: usage, registry, logger }),
        webhookQueue,
        userSettings,
        notifier,
        sync: { batches: new SyncBatches({ repo: syncRepo, uploads, queue: syncQueue, redis, prefix: config.redisPrefix, now: () => clock.now(), refused: (outcome) => syncMetrics.batches.inc({ outcome }), probe: (bytes, filename, nowMs) => fileDecoder!.probe(bytes, filename, nowMs) }), uploads },
        voice: new VoiceTranscriber({ engines: voiceEngines(config, stt.engines), check: new SpeechCheck(), decoder: fileDecoder, scheduler, logger, metrics: registerVoiceMetrics(registry) }),
        speakerEmbeddings,
        silenceTrimmer: speakerEmbeddings,
        voiceprints: new Voiceprints(store.knex, speakerEmbeddings, () => clock.now()),
        accounts: new Accounts({ knex: store.knex, events, authenticator, uploads, versions, logger, deleted: deletedAccounts, now: () => clock.now() }),
      };
      webhookParts(services, opts.webhookResolver ? { resolve: opts.webhookResolver } : {});
      daySummaries(services);
      const sessions = createSessions(services, registry);
      await events.attach(
        (event) => void sessions.actors.deliver(event),
        (uid) => sessions.actors.endRecording(uid),
        // The closed sessions' usage is written before the answer, so the erasure that follows finds it.
        async (uid) => {
          const closed = await sessions.actors.closeUser(uid, CloseCode.ACCOUNT_DELETED, 'account deleted');
          await services.usageRecorder.flush().catch(() => undefined);
          return closed;
        },
      );
      const kept = new KeptAudioStore(config.dataDir);
      if (runsJobs) {
        webhookWorker = new WebhookWorker({
          services,
          redisUrl,
          prefix: config.redisPrefix,
          ...(opts.tuning?.webhookTimeoutMs ? { timeoutMs: opts.tuning.webhookTimeoutMs } : {}),
          ...(opts.tuning?.webhookStalledIntervalMs ? { stalledIntervalMs: opts.tuning.webhookStalledIntervalMs } : {}),
        });
        daySummarySchedule = new DaySummarySchedule({ services, redisUrl });
        await daySummarySchedule.start();
        worker = startJobsNode({ services, events, redisUrl, keptIndex, onProcessed: conversationCreatedListener(services), ...(opts.tuning?.processingStalledIntervalMs ? { stalledIntervalMs: opts.tuning.processingStalledIntervalMs } : {}) });
        syncWorker = new SyncWorker({
          redisUrl,
          prefix: config.redisPrefix,
          deps: {
            sync: syncRepo,
            uploads,
            conversations,
            lifecycle,
            queue,
            stt,
            scheduler,
            logger,
            now: () => clock.now(),
            ensureUser: (uid) => users.ensure(uid, clock.now(), config.memoryAccessDefault === 'enabled'),
            language: async (uid) => (await userSettings.get(uid)).language ?? 'en',
            decode: (bytes, filename, nowMs) => fileDecoder!.sync(bytes, filename, nowMs),
            metrics: { batch: (outcome) => syncMetrics.batches.inc({ outcome }), file: (status) => syncMetrics.files.inc({ status }), audioSeconds: (s) => syncMetrics.audioSeconds.inc(s) },
          },
        });
        // Uploads their clients gave up: every jobs node looks (they share DATA_DIR, and a removal twice is harmless).
        scheduler.every(UPLOAD_SWEEP_INTERVAL_MS, async () => {
          const removed = await uploads.sweep(clock.now());
          if (removed === 0) return;
          syncMetrics.uploadsExpired.inc(removed);
          logger.info({ removed }, 'idle sync uploads removed');
        });
        // Logs past their retention; every jobs node prunes (a row deleted twice is deleted once).
        const retention = new Retention(store.knex, retentionRules({ logs: config.logRetentionDays, notifications: config.notificationRetentionDays }));
        const pruned = registerRetentionMetrics(registry);
        scheduler.every(RETENTION_INTERVAL_MS, async () => {
          for (const [table, deleted] of await retention.sweep(clock.now())) {
            pruned.inc({ table }, deleted);
            logger.info({ table, deleted }, 'records past their retention deleted');
          }
        });
      }
      // Kept audio is on this node's disk: a listen node consumes its own transcribe-kept-audio queue.
      if (runsListen) keptJobs = new KeptAudioJobs({ redisUrl, prefix: config.redisPrefix, dataDir: config.dataDir, index: keptIndex, deps: { conversations, stt, kept, scheduler, logger, now: () => clock.now(), process: (id, uid) => queue.process(id, uid) } });
      const http = createApiNode({ services, registry, versions, ...(opts.extraRoutes ? { extraRoutes: opts.extraRoutes } : {}) });
      if (runsListen) {
        const parts = webhookParts(services);
        proactive = new ProactiveNotifications({
          config, knex: store.knex, redis, clock, logger, apps: parts.apps, deliveries: parts.deliveries, notifier,
          sources: { settings: userSettings, memories: services.memories, conversations },
        });
        const act = proactive.handle;
        listen = startListenNode({
          services,
          registry,
          app: http.app,
          authenticator,
          sessions,
          scheduler,
          stt,
          kept,
          keptJobs: () => keptJobs,
          tuning: opts.tuning ?? {},
          ...(opts.codecWorker ? { codecWorker: opts.codecWorker } : {}),
          onAppReply: (r, segs) => {
            opts.onAppReply?.(r, segs);
            act(r, segs);
          },
          liveDeliveryLog: opts.liveDeliveryLog ?? webhookQueue.deliveries,
        });
        codecPool = listen.codecPool;
        pacer = listen.pacer;
      }
      http.seal();

      const service = new Service(services, http, subscriber, embedded, { scheduler, queue, events, registry: sessions.actors, stt, codecPool, worker, webhookQueue, webhookWorker, keptJobs, compaction, pacer, pushes, liveWebhooks: listen?.liveWebhooks, audioLogs: listen?.audioLogs, proactive, daySummarySchedule, syncQueue, syncWorker, fileDecoder });
      service.port = await http.listen(config.host, config.port);
      logger.info({ host: config.host, port: service.port, role: config.role, store: store.dialect }, 'listening');
      return service;
    } catch (err) {
      compaction?.close();
      pacer?.close();
      await listen?.audioLogs.close().catch(() => undefined);
      scheduler.close();
      await worker?.close();
      await syncWorker?.close();
      await fileDecoder?.close();
      await syncQueue.close();
      await daySummarySchedule?.close();
      await webhookWorker?.close();
      await keptJobs?.close();
      await pushes?.close();
      await queue.close();
      await webhookQueue.close();
      await codecPool?.close().catch(() => undefined);
      await speakerEmbeddings?.close();
      redis.disconnect();
      subscriber.disconnect();
      await store.close().catch(() => undefined);
      await embedded?.stop();
      throw err;
    }
  }

  /**
   * Graceful shutdown: stop accepting, let in-flight requests finish (bounded by SHUTDOWN_TIMEOUT_MS),
   * then close Redis, the store and an embedded redis-server. Safe to call twice.
   */
  stop(): Promise<void> {
    this.#stopping ??= this.#stop();
    return this.#stopping;
  }

  async #stop(): Promise<void> {
    const { logger, config } = this;
    const live = this.#live;
    const bound = config.shutdownTimeoutMs;
    logger.info('shutting down');
    // First, so that an upgrade already on an accepted connection is refused (1013) rather than started and drained.
    live.registry.stopAdmitting();
    await this.#step('http', () => this.http.stopListening(), bound, () => ({ inFlight: this.http.inFlight }));
    // Voice messages under way were answered above; their speech gate's thread goes now.
    await this.#step('voice', () => this.services.voice.close(), bound);
    // Live sessions: finalise STT, flush the last segments, close with 1012 (reconnect now, to another node); their
    // open conversations are left to the idle check on the queue, so a reconnect elsewhere can resume them.
    await this.#step('sessions', () => live.registry.drainAll(CloseCode.SERVICE_RESTART, SERVICE_RESTART_REASON), bound, () => ({ sessions: live.registry.size }));
    // Their audio logs' last records and end marks, so no other node takes their audio for unfinished.
    await this.#step('audio-logs', () => live.audioLogs?.close(), bound);
    // The last audio windows and transcript batches of the sessions just drained, while the store still takes replies.
    await this.#step('live-webhooks', () => live.liveWebhooks?.close(), bound);
    // Notifications those last replies asked for, while the notifier and the store still take them.
    await this.#step('proactive', () => live.proactive?.close(), bound);
    await this.#step('jobs', () => live.worker?.close(), bound);
    // A batch cut short here is re-run by BullMQ; its files done so far are recorded and not transcribed again.
    await this.#step('sync-jobs', () => live.syncWorker?.close(), bound);
    // Voice messages and sync batches have finished above: nothing waits on a file now.
    await this.#step('file-decoder', () => live.fileDecoder?.close(), bound);
    await this.#step('day-summaries', () => live.daySummarySchedule?.close(), bound);
    // Attempts under way finish (bounded); one cut short is sent again by another jobs process, same webhook id.
    await this.#step('webhooks', () => live.webhookWorker?.close(), bound);
    // No job runs now, and the HTTP routes that process in the request have finished (or timed out) above.
    await this.#step('processor', () => this.services.processor.close?.(), bound);
    await this.#step('speaker-embeddings', () => this.services.speakerEmbeddings.close(), bound);
    await this.#step('kept-audio-jobs', () => live.keptJobs?.close(), bound);
    await this.#step('notifications', async () => {
      await this.services.notifier.close();
      await live.pushes.close();
    }, bound);
    await this.#step('queue', () => live.queue.close(), bound);
    await this.#step('sync-queue', () => live.syncQueue.close(), bound);
    await this.#step('webhook-queue', () => live.webhookQueue.close(), bound);
    await this.#step('session-events', () => live.events.close(), bound);
    // Provider streams whose session already ended may still wait for the provider's close after CloseStream. Before
    // the codec shards: their threads hold the provider sockets, and a CloseStream still queued for one would be lost.
    await this.#step('stt', () => live.stt.close(), bound);
    // A thread that died while closing took its decoders with it: nothing is left to flush, so that is no failure.
    await this.#step('codec-shards', () => live.codecPool?.close().catch(() => undefined), bound);
    live.compaction?.close();
    live.pacer?.close();
    live.scheduler.close();
    // Usage recorded by the sessions just drained reaches the store before it closes.
    await this.#step('usage', () => this.services.usageRecorder.close(), bound);
    // A Redis that went away must not hold shutdown hostage: quit politely, then drop the connection.
    await this.#step('authenticator', () => this.services.authenticator.close(), 1000);
    // quit() can fail fast while the client is reconnecting; disconnect() afterwards stops any reconnect loop.
    await this.#step('redis', () => Promise.all([this.services.redis, this.#subscriber].map(async (r) => {
      await within(r.quit(), 1000);
      r.disconnect();
    })), bound);
    await this.#step('store', () => this.services.store.close(), bound);
    await this.#step('embedded-redis', () => this.#embedded?.stop(), bound);
    this.#stopStep = '';
    const failed = this.#failedSteps;
    if (failed.length > 0) throw new Error(`shutdown steps failed: ${failed.join(', ')}`);
    logger.info('stopped');
  }

  /**
   * One step of the shutdown, named in `stopStep` while it runs: waits for it at most `ms` (then goes on without it,
   * with a warning that names it), and warns of one that took longer than SLOW_STOP_STEP_MS. A step that fails is
   * logged and the ones after it still run; stop() then rejects, naming it (the process exits 1).
   */
  async #step(name: string, close: () => Promise<unknown> | undefined, ms: number, detail: () => object = () => ({})): Promise<void> {
    this.#stopStep = name;
    const started = performance.now();
    const p = (async () => close())().catch((err: unknown) => {
      this.#failedSteps.push(name);
      this.logger.error({ step: name, err: { message: err instanceof Error ? err.message : String(err) } }, 'shutdown step failed');
    });
    if (!(await within(p, ms))) {
      this.logger.warn({ step: name, waitedMs: ms, ...detail() }, 'shutdown step did not finish in time: going on without it');
      return;
    }
    const took = performance.now() - started;
    if (took >= SLOW_STOP_STEP_MS) this.logger.warn({ step: name, ms: Math.round(took) }, 'shutdown step was slow');
  }

  /** The shutdown step under way (`http`, `sessions`, ..., `store`); empty before stop() and once it finished. */
  get stopStep(): string {
    return this.#stopStep;
  }
}

/** The close reason of live sessions drained at shutdown (close 1012). */
export const SERVICE_RESTART_REASON = 'service restart: reconnect';

/** A shutdown step taking at least this long is logged (each is bounded by SHUTDOWN_TIMEOUT_MS). */
const SLOW_STOP_STEP_MS = 5000;


/**
 * The node's speaker embeddings. The built-in one starts its thread with the first embedding; a model file is loaded
 * and checked now, so a file that is not a speaker model stops start-up instead of failing the first upload.
 */
async function startSpeakerEmbeddings(config: Config, logger: Logger): Promise<ThreadEmbeddingService> {
  const modelPath = config.speakerModelPath;
  if (modelPath === undefined) return createEmbeddingService();
  let service: ThreadEmbeddingService;
  try {
    service = createEmbeddingService({ modelPath });
  } catch (err) {
    throw new ConfigError('SPEAKER_MODEL_PATH', `cannot read ${modelPath}: ${(err as Error).message}`);
  }
  try {
    const loaded = await service.load();
    logger.info({ model: loaded.model, sha256: loaded.sha256, dimension: loaded.dimension }, 'speaker model loaded');
  } catch (err) {
    await service.close();
    throw new ConfigError('SPEAKER_MODEL_PATH', (err as Error).message);
  }
  return service;
}
