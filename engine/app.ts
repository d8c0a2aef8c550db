// Composition root: wires config, store, Redis, identity and routes into one running service, and takes it down gracefully.
import { performance } from 'node:perf_hooks';
import client from 'prom-client';
import type { Redis } from 'ioredis';
import type { Config } from './config.js';
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
import { createRedis, resolveRedis, type EmbeddedRedis } from './redis.js';
import { LocalIssuer, remoteVerifier, type IdTokenVerifier } from './identity/id-tokens.js';
import { Authenticator, type Principal } from './identity/authenticator.js';
import { HttpAdapter, type AuthResult, type AuthSpec, type Route } from '../http/adapter.js';
import { allRoutes } from '../http/routes/index.js';
import { openApiRoute } from '../http/routes/openapi.js';
import type { Services } from '../http/routes/types.js';
import type { Scope } from './protocol.js';
import { RateLimiter } from './identity/rate-limit.js';
import { DataVersions } from './cache/data-versions.js';
import { Scheduler } from './scheduler.js';
import { registerMallocMetrics, startMemoryTrim } from './runtime/memory-trim.js';
import { startHeapCompaction, type HeapCompaction } from './runtime/heap-compaction.js';
import { BATCH_WINDOW_MS, CodecPool, INLINE_BUSY_PCT } from './codec/pool.js';
import type { SttEngine } from './stt/types.js';
import { createSttEngines } from './stt/engines.js';
import { SttRegistry } from './stt/registry.js';
import { KeptAudioStore } from './stt/kept-audio.js';
import { KeptAudioIndex, KeptAudioJobs } from './jobs/kept-audio-jobs.js';
import { ProcessingQueue, within } from './jobs/queues.js';
import { registerQueueMetrics } from './jobs/queue-metrics.js';
import { SessionEvents } from './jobs/session-events.js';
import { ProcessConversationWorker } from './jobs/process-conversation.js';
import { ConversationLifecycle } from './conversations/lifecycle.js';
import { ActorRegistry } from './listen/actor-registry.js';
import { SessionActor } from './listen/session-actor.js';
import { attachListen } from './listen/uws-server.js';
import { CloseCode } from './protocol.js';
import { MainLoad, type LoopTimes } from './runtime/main-load.js';
import { LoopPacer, PACER_LOOK_MS } from './runtime/loop-pacer.js';
import { DecodeOverload } from './codec/overload.js';

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
}

/**
 * The live path's tuning, each a constant next to the code it tunes; a test may override one to exercise it.
 * Each field's default and reason is documented at its constant.
 */
export interface Tuning {
  /** Least time between two decode tasks of one codec shard, in ms. */
  readonly codecBatchMs?: number;
  /** Least time between two polls of the main thread's sockets under streaming load, in ms; 0 never paces. */
  readonly loopPaceMs?: number;
  /** New sessions decode on the main thread while it was busy less than this percent of the last second; 0 never. */
  readonly inlineBusyPct?: number;
  /** Seconds between two malloc_trim runs; 0 never. */
  readonly mallocTrimIntervalS?: number;
  /** Seconds between two JS heap compactions; 0 never. */
  readonly heapCompactIntervalS?: number;
  /** Audio per message to remote speech providers, in ms. */
  readonly sttSendMs?: number;
}

/** The live path's parts; present on every node, the socket and worker only for the roles that run them. */
interface LiveParts {
  scheduler: Scheduler;
  queue: ProcessingQueue;
  events: SessionEvents;
  registry: ActorRegistry;
  stt: SttRegistry;
  codecPool: CodecPool | undefined;
  worker: ProcessConversationWorker | undefined;
  keptJobs: KeptAudioJobs | undefined;
  compaction: HeapCompaction | undefined;
  pacer: LoopPacer | undefined;
}

const ANONYMOUS: Principal = { uid: '', via: 'none' };

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
  #subscriber: Redis;
  #stopping: Promise<void> | undefined;
  #stopStep = '';
  readonly #failedSteps: string[] = [];
  readonly #live: LiveParts;

  private constructor(services: Services, http: HttpAdapter<Principal>, subscriber: Redis, embedded: EmbeddedRedis | undefined, live: LiveParts) {
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

  /** Opens every dependency, runs migrations and starts listening. */
  static async start(opts: ServiceOptions): Promise<Service> {
    const { config } = opts;
    const clock = opts.clock ?? systemClock;
    const logger = opts.logger ?? createLogger(config.logLevel);
    const { url: redisUrl, embedded } = await resolveRedis(config, logger);
    const store: Store = openStore(storeOptions(config));
    const redis = createRedis(redisUrl);
    const subscriber = createRedis(redisUrl);
    redis.on('error', () => undefined);
    subscriber.on('error', () => undefined);
    const scheduler = new Scheduler({ clock, resolutionMs: opts.schedulerResolutionMs ?? 50, onError: (err) => logger.error({ err: { name: (err as Error)?.name } }, 'scheduled task failed') });
    const queue = new ProcessingQueue({ redisUrl, prefix: config.redisPrefix });
    const events = new SessionEvents({ publisher: redis, subscriber, channel: `${config.redisPrefix}:listen:events` });
    const runsListen = config.role === 'all' || config.role === 'listen';
    const runsJobs = config.role === 'all' || config.role === 'jobs';
    let codecPool: CodecPool | undefined;
    let worker: ProcessConversationWorker | undefined;
    let keptJobs: KeptAudioJobs | undefined;
    let compaction: HeapCompaction | undefined;
    let pacer: LoopPacer | undefined;
    try {
      const applied = await store.migrate();
      if (applied.length > 0) logger.info({ migrations: applied.length, dialect: store.dialect }, 'migrations applied');
      const registry = new client.Registry();
      client.collectDefaultMetrics({ register: registry });
      startMemoryTrim({ scheduler, registry, intervalS: config.mallocTrimIntervalS });
      compaction = startHeapCompaction({ scheduler, registry, intervalS: config.heapCompactIntervalS, tidyThreads: () => codecPool?.tidyThreads() ?? 0 });
      registerMallocMetrics(registry);
      registerQueueMetrics(registry, () => [{ name: 'processing', queue: queue.queue }, ...(keptJobs ? [{ name: 'transcribe_kept_audio', queue: keptJobs.queue }] : [])]);
      const apiKeys = new ApiKeysRepository(store.knex);
      const versions = new DataVersions({ redis, prefix: config.redisPrefix, logger });
      const users = new UsersRepository(store.knex, versions);
      const conversations = new ConversationsRepository(store.knex, () => clock.now());
      const keptIndex = new KeptAudioIndex(redis, config.redisPrefix);
      const lifecycle = new ConversationLifecycle({ conversations, users, clock, logger, queue, events, memoryAccessDefault: config.memoryAccessDefault === 'enabled', keptAudio: keptIndex });
      const authenticator = new Authenticator({
        verifier: await createVerifier(config, clock),
        keys: apiKeys,
        clock,
        logger,
        lastUsedIntervalMs: config.keyLastUsedIntervalS * 1000,
        cacheTtlMs: config.keyCacheTtlS * 1000,
        idTokenCacheMs: config.idTokenCacheS * 1000,
        revocationChannel: `${config.redisPrefix}:api-keys:revoked`,
      });
      await authenticator.attach(redis, subscriber);
      const usage = new UsageRepository(store.knex);
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
      };
      const stt = new SttRegistry(opts.sttEngines ?? createSttEngines(config, { clock, scheduler, logger, sendMs: opts.tuning?.sttSendMs }));
      const shed = new client.Counter({
        name: 'listen_sessions_shed_total',
        help: 'New /v4/listen sessions refused with 1013 because live audio waited on decoding for longer than LISTEN_SHED_DECODE_DELAY_MS, or transcript writes on the store for longer than LISTEN_SHED_STORE_DELAY_MS.',
        registers: [registry],
      });
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
      new client.Gauge({
        name: 'store_transcript_write_backlog_seconds',
        help: 'How long the oldest live-transcript write not yet committed has waited; growing: the store falls behind the sessions (LISTEN_SHED_STORE_DELAY_MS).',
        registers: [registry],
        collect() {
          this.set(conversations.tailWriteBacklogMs() / 1000);
        },
      });
      const actors = new ActorRegistry({
        maxSessions: config.maxSessions,
        maxSessionsPerUser: config.maxSessionsPerUser,
        overloaded: () => overload.overloaded || storeOverloaded(),
        onShed: () => shed.inc(),
        conversations,
        logger,
      });
      await events.attach((event) => void actors.deliver(event));
      new client.Gauge({
        name: 'listen_sessions',
        help: 'Live /v4/listen sessions on this node.',
        registers: [registry],
        collect() {
          this.set(actors.size);
        },
      });
      new client.Gauge({
        name: 'listen_sessions_draining',
        help: 'Sessions of listen_sessions whose client left and that are still finishing their audio (not counted against the per-user limit).',
        registers: [registry],
        collect() {
          this.set(actors.draining);
        },
      });
      const kept = new KeptAudioStore(config.dataDir);
      if (runsJobs) worker = new ProcessConversationWorker({ services, events, redisUrl, prefix: config.redisPrefix, concurrency: config.jobConcurrency, kept: keptIndex });
      // Kept audio is on this node's disk: a listen node consumes its own transcribe-kept-audio queue.
      if (runsListen) keptJobs = new KeptAudioJobs({ redisUrl, prefix: config.redisPrefix, dataDir: config.dataDir, index: keptIndex, deps: { conversations, stt, kept, scheduler, logger, now: () => clock.now(), process: (id, uid) => queue.process(id, uid) } });

      const limiter = new RateLimiter({ redis, clock, prefix: config.redisPrefix, perMinute: config.rateLimitPerMinute, perDay: config.rateLimitPerDay, versions });
      const http = new HttpAdapter<Principal>({
        logger,
        registry,
        maxBodyBytes: config.maxBodyBytes,
        responseCacheBytes: config.responseCacheBytes,
        authenticate: (spec, headers, route) => authenticate(authenticator, limiter, spec, headers, route),
      });
      for (const route of [...allRoutes(services), ...(opts.extraRoutes?.(services) ?? [])]) http.add(route);
      http.add(openApiRoute(() => http.routes as readonly Route<unknown>[]));
      if (runsListen) {
        const decodeDelay = new client.Histogram({
          name: 'listen_decode_delay_seconds',
          help: "Per decode task: how long its longest-waiting live audio waited, from complete for its consumer (a provider message's worth) to decoded PCM back on the main thread. The engine's own share of a frame's delay; it climbs as a node nears saturation.",
          buckets: [0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
          registers: [registry],
        });
        const loopPacer = config.listenLoopPaceMs > 0 ? (pacer = new LoopPacer({ intervalMs: config.listenLoopPaceMs })) : undefined;
        if (loopPacer) {
          scheduler.every(PACER_LOOK_MS, () => loopPacer.look());
          new client.Counter({
            name: 'listen_loop_paced_seconds_total',
            help: 'Time the main thread slept between polls to let frames gather (LISTEN_LOOP_PACE_MS); part of the event-loop delay, not of its work.',
            registers: [registry],
            collect() {
              this.reset();
              this.inc(loopPacer.sleptMs / 1000);
            },
          });
          new client.Gauge({
            name: 'listen_loop_paced',
            help: 'Whether the main thread polls its sockets paced now (1) or sleeps in epoll until the next event (0).',
            registers: [registry],
            collect() {
              this.set(loopPacer.paced ? 1 : 0);
            },
          });
        }
        // The busy share leaves out the pacer's sleeps: the loop was waiting for frames then, not working.
        const loopTimes = (): LoopTimes => {
          const u = performance.eventLoopUtilization();
          const slept = loopPacer?.sleptMs ?? 0;
          return { idle: u.idle + slept, active: Math.max(0, u.active - slept) };
        };
        const inlineBusyPct = opts.tuning?.inlineBusyPct ?? INLINE_BUSY_PCT;
        const mainLoad = inlineBusyPct > 0 ? new MainLoad({ limit: inlineBusyPct / 100, clock, read: loopTimes }) : undefined;
        const pool = (codecPool = new CodecPool({
          ...(config.codecThreads > 0 ? { threads: config.codecThreads } : {}),
          batchWindowMs: opts.tuning?.codecBatchMs ?? BATCH_WINDOW_MS,
          onTaskDelay: (s) => {
            decodeDelay.observe(s);
            overload.observe(s);
          },
          ...(opts.codecWorker ? { filename: opts.codecWorker } : {}),
          ...(mainLoad ? { inline: (sessions: number) => mainLoad.admit(sessions) } : {}),
        }));
        new client.Gauge({
          name: 'codec_sessions',
          help: 'Open live-audio decode streams by the thread that decodes them: each codec shard (0, 1, ...) and "main" (CODEC_INLINE_BUSY_PCT).',
          labelNames: ['thread'],
          registers: [registry],
          collect() {
            this.reset();
            pool.load.forEach((n, i) => this.set({ thread: String(i) }, n));
            this.set({ thread: 'main' }, pool.inlineLoad);
          },
        });
        new client.Gauge({
          name: 'codec_thread_heap_bytes',
          help: "Each codec shard thread's V8 heap, used and committed (not in nodejs_heap_size_*, which is the main thread's).",
          labelNames: ['shard', 'state'],
          registers: [registry],
          async collect() {
            this.reset();
            for (const h of await pool.threadHeaps()) {
              this.set({ shard: String(h.shard), state: 'used' }, h.usedBytes);
              this.set({ shard: String(h.shard), state: 'committed' }, h.committedBytes);
            }
          },
        });
        const sttFailures = new client.Counter({
          name: 'stt_stream_failures_total',
          help: "Live sessions whose speech provider failed mid-stream (the session ends with stt_failed), by provider and reason.",
          labelNames: ['provider', 'reason'],
          registers: [registry],
        });
        const keptSeconds = new client.Counter({
          name: 'stt_kept_audio_seconds_total',
          help: 'Seconds of audio a failed provider left unanswered, kept on disk and transcribed later instead of lost.',
          labelNames: ['provider'],
          registers: [registry],
        });
        const flushFailures = new client.Counter({
          name: 'listen_transcript_write_failures_total',
          help: "Sessions' 600 ms transcript steps whose store write failed; their segments wait for the next step.",
          registers: [registry],
        });
        const transcriptLost = new client.Counter({
          name: 'listen_transcript_items_lost_total',
          help: 'Transcript segments and photos a closing session gave up because its store writes failed at every try.',
          registers: [registry],
        });
        attachListen(http.app, {
          authenticator,
          registry: actors,
          logger,
          ...(loopPacer ? { pacer: loopPacer } : {}),
          createActor: ({ sessionId, params, socket }) =>
            new SessionActor({
              sessionId,
              params,
              socket,
              scheduler,
              clock,
              logger,
              codecPool: pool,
              stt,
              lifecycle,
              conversations,
              maxInboundBytes: config.listenMaxInboundBytes,
              maxOutboundBytes: 4 * 1024 * 1024,
              onClosed: (actor) => actors.remove(actor),
              ...(config.customSttUrl ? { customSttUrl: config.customSttUrl } : {}),
              usage: services.usageRecorder,
              onProviderFailure: (provider, reason, keptS) => {
                sttFailures.inc({ provider, reason });
                if (keptS > 0) keptSeconds.inc({ provider }, keptS);
              },
              onFlushFailed: () => flushFailures.inc(),
              onTranscriptLost: (items) => transcriptLost.inc(items),
              keepAudio: async (meta, chunks) => keptJobs?.add({ conversationId: meta.conversationId, uid: meta.uid, keptId: await kept.keep(meta, chunks) }),
            }),
        });
      }
      http.seal();

      const service = new Service(services, http, subscriber, embedded, { scheduler, queue, events, registry: actors, stt, codecPool, worker, keptJobs, compaction, pacer });
      service.port = await http.listen(config.host, config.port);
      logger.info({ host: config.host, port: service.port, role: config.role, store: store.dialect }, 'listening');
      return service;
    } catch (err) {
      compaction?.close();
      pacer?.close();
      scheduler.close();
      await worker?.close();
      await keptJobs?.close();
      await queue.close();
      await codecPool?.close().catch(() => undefined);
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
    await this.#step('http', () => this.http.stopListening(), bound, () => ({ inFlight: this.http.inFlight }));
    // Live sessions: stop admitting, finalise STT, flush the last segments, close with 1001; their open
    // conversations are left to the idle check on the queue, so a reconnect elsewhere can resume them.
    await this.#step('sessions', () => live.registry.drainAll(CloseCode.GOING_AWAY, 'server shutting down'), bound, () => ({ sessions: live.registry.size }));
    await this.#step('jobs', () => live.worker?.close(), bound);
    // No job runs now, and the HTTP routes that process in the request have finished (or timed out) above.
    await this.#step('processor', () => this.services.processor.close?.(), bound);
    await this.#step('kept-audio-jobs', () => live.keptJobs?.close(), bound);
    await this.#step('queue', () => live.queue.close(), bound);
    await this.#step('session-events', () => live.events.close(), bound);
    // A thread that died while closing took its decoders with it: nothing is left to flush, so that is no failure.
    await this.#step('codec-shards', () => live.codecPool?.close().catch(() => undefined), bound);
    // Provider streams whose session already ended may still wait for the provider's close after CloseStream.
    await this.#step('stt', () => live.stt.close(), bound);
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

/** A shutdown step taking at least this long is logged (each is bounded by SHUTDOWN_TIMEOUT_MS). */
const SLOW_STOP_STEP_MS = 5000;

/** The developer API's rate limits cover every authenticated route under this prefix. */
const RATE_LIMITED_PREFIX = '/v1/dev/';

async function authenticate(
  a: Authenticator,
  limiter: RateLimiter,
  spec: AuthSpec,
  headers: Readonly<Record<string, string>>,
  route: Route<Principal>,
): Promise<AuthResult<Principal>> {
  let principal: Principal;
  switch (spec.kind) {
    case 'none':
      return { principal: ANONYMOUS };
    case 'id_token':
      principal = await a.idToken(headers.authorization);
      break;
    case 'api_key':
      principal = await a.apiKey(headers.authorization, 'dev', spec.scope as Scope, spec.alsoIdToken);
      break;
    case 'mcp_key':
      principal = await a.apiKey(headers.authorization, 'mcp', undefined);
      break;
  }
  if (!route.path.startsWith(RATE_LIMITED_PREFIX)) return { principal };
  // Per key per minute; a signed-in user without a key counts as one subject of their own. The same round trip
  // reads the user's data version, which lets the guard and cacheable routes reuse what they computed before.
  const limited = await limiter.hit(principal.keyId ?? `user:${principal.uid}`, principal.uid);
  const dataVersion = limited.dataVersion;
  return { principal, headers: limited.headers, ...(dataVersion === undefined ? {} : { dataVersion: { owner: principal.uid, token: dataVersion } }) };
}
