// Redis connections (one server or a Redis Cluster), and an embedded redis-server the service starts and supervises
// when nothing answers at REDIS_URL.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { Cluster, Redis, type ClusterOptions, type RedisOptions } from 'ioredis';
import type { Logger } from './logger.js';
import { anyCause, EngineError } from './errors.js';
import { isClusterUrl, parseClusterUrl } from './redis-url.js';

export { isClusterUrl } from './redis-url.js';

/** A connection to one Redis server or to a Redis Cluster: both take the same commands, scripts and subscriptions. */
export type RedisClient = Redis | Cluster;

/**
 * Longest a command waits for its answer. A Redis that stops answering without closing its connections (a frozen
 * process, a network that drops packets) would otherwise hold every request that needs it for ever; past this the
 * command fails as on a lost connection. Far above what any of the service's commands takes on a loaded Redis.
 */
export const COMMAND_TIMEOUT_MS = 5000;

/** Whether `err` (or its cause) is Redis being away: a lost connection, retries spent, or a command left unanswered. */
export function isRedisUnavailable(err: unknown): boolean {
  return anyCause(err, (e) =>
    e.name === 'MaxRetriesPerRequestError' || e.name === 'ClusterAllFailedError' ||
    (typeof e.message === 'string' && /^(Command timed out|Connection is closed|Stream isn't writeable)/.test(e.message)));
}

/**
 * A client for commands: fails fast rather than queueing forever while Redis is away, and gives up on a command left
 * unanswered after COMMAND_TIMEOUT_MS (blocking readers and subscribers pass `commandTimeout: undefined`). `url` is
 * one server's URL or a cluster's (`redis+cluster://host1:port1,host2:port2/`); on a cluster, `extra` applies to the
 * connection to each node, except the options that belong to the cluster as a whole (pipelining, offline queue,
 * ready check, lazy connect, reconnecting).
 */
export function createRedis(url: string, extra: RedisOptions = {}): RedisClient {
  const options: RedisOptions = {
    maxRetriesPerRequest: 2,
    connectTimeout: 2000,
    enableReadyCheck: true,
    // Commands issued in the same tick (many requests' rate-limit checks) share one round trip.
    enableAutoPipelining: true,
    // Reconnect with capped backoff; commands issued meanwhile fail after maxRetriesPerRequest.
    retryStrategy: (times) => Math.min(times * 200, 2000),
    commandTimeout: COMMAND_TIMEOUT_MS,
    ...extra,
  };
  if (!isClusterUrl(url)) return new Redis(url, options);
  const { retryStrategy, enableAutoPipelining, enableOfflineQueue, enableReadyCheck, lazyConnect, ...nodeOptions } = options;
  const seeds = parseClusterUrl(url);
  const cluster: ClusterOptions = {
    // A slot moved by a resharding or a failover is followed, then the command fails like one on a lost connection.
    maxRedirections: 16,
    retryDelayOnFailover: 200,
    retryDelayOnClusterDown: 300,
    slotsRefreshTimeout: 2000,
    redisOptions: {
      ...nodeOptions,
      ...(seeds.username !== undefined ? { username: seeds.username } : {}),
      ...(seeds.password !== undefined ? { password: seeds.password } : {}),
      ...(seeds.tls ? { tls: {} } : {}),
    },
  };
  // Only the options given: an undefined one would override ioredis's default.
  if (retryStrategy !== undefined) cluster.clusterRetryStrategy = retryStrategy;
  if (enableAutoPipelining !== undefined) cluster.enableAutoPipelining = enableAutoPipelining;
  if (enableOfflineQueue !== undefined) cluster.enableOfflineQueue = enableOfflineQueue;
  if (enableReadyCheck !== undefined) cluster.enableReadyCheck = enableReadyCheck;
  if (lazyConnect !== undefined) cluster.lazyConnect = lazyConnect;
  return new Cluster(seeds.nodes.map((n) => ({ ...n })), cluster);
}

/**
 * How many subscribers a message published on `channel` reached, given PUBLISH's answer `published`. One server counts
 * them all; a cluster node counts only its own clients, so on a cluster every node is asked (PUBSUB NUMSUB). Infinity
 * when a node does not answer: the caller then waits for its answers until its timeout.
 */
export async function subscribersReached(client: RedisClient, channel: string, published: number): Promise<number> {
  if (!(client instanceof Cluster)) return published;
  const counts: number[] = await Promise.all(
    client.nodes('all').map((node) => node.pubsub('NUMSUB', channel).then((r) => Number((r as unknown[])[1] ?? 0), () => Infinity)),
  );
  return counts.reduce((a, b) => a + b, 0);
}

/** A cluster's probe connects to a seed, reads the slot map, then connects to every master: it gets longer. */
const CLUSTER_PROBE_MS = 5000;

/** True when a Redis server (or a cluster with all its slots served) answers PING at `url` within `timeoutMs`. */
export async function redisAnswers(url: string, timeoutMs = isClusterUrl(url) ? CLUSTER_PROBE_MS : 1000): Promise<boolean> {
  const probe = createRedis(url, { lazyConnect: true, connectTimeout: timeoutMs, maxRetriesPerRequest: 0, retryStrategy: () => null, enableOfflineQueue: false, enableAutoPipelining: false });
  probe.on('error', () => undefined);
  let timer: NodeJS.Timeout | undefined;
  try {
    const answer = probe.connect().then(() => probe.ping());
    if (!isClusterUrl(url)) return (await answer) === 'PONG';
    // A cluster's connect asks several nodes in turn: bound the whole probe, not only each connection.
    const late = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error('redis probe timeout')), timeoutMs * 2)));
    return (await Promise.race([answer, late])) === 'PONG';
  } catch {
    return false;
  } finally {
    clearTimeout(timer);
    probe.disconnect();
  }
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
  });
}

function hasRedisServer(): boolean {
  return spawnSync('redis-server', ['--version'], { stdio: 'ignore' }).status === 0;
}

/**
 * A redis-server child process with its data under DATA_DIR/redis. Restarted (at most 5 times a minute)
 * if it exits on its own; stopped with SIGTERM on shutdown so it can write its append-only file.
 */
const PORT_FILE = 'port';

export class EmbeddedRedis {
  #child: ChildProcess | undefined;
  #stopping = false;
  #restarts: number[] = [];

  private constructor(readonly port: number, readonly dir: string, readonly logger: Logger) {}

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  static async start(dataDir: string, logger: Logger): Promise<EmbeddedRedis> {
    const dir = path.join(dataDir, 'redis');
    fs.mkdirSync(dir, { recursive: true });
    const r = new EmbeddedRedis(await freePort(), dir, logger);
    r.#spawn();
    const deadline = Date.now() + 10_000;
    while (!(await redisAnswers(r.url, 500))) {
      if (Date.now() > deadline || r.#child?.exitCode !== null) {
        await r.stop();
        throw new EngineError('ENG_ERR_BOOT_REDIS_UNAVAILABLE');
      }
      await new Promise((res) => setTimeout(res, 50));
    }
    logger.info({ port: r.port }, 'embedded redis-server started');
    // Operator commands (scripts/admin.ts) find the running server here, to announce the writes they make.
    fs.writeFileSync(path.join(dir, PORT_FILE), String(r.port));
    return r;
  }

  /** The URL of the embedded server a service runs on `dataDir`, when one answers. */
  static async running(dataDir: string): Promise<string | undefined> {
    let port: string;
    try {
      port = fs.readFileSync(path.join(dataDir, 'redis', PORT_FILE), 'utf8').trim();
    } catch {
      return undefined;
    }
    const url = `redis://127.0.0.1:${port}`;
    return /^\d+$/.test(port) && (await redisAnswers(url, 500)) ? url : undefined;
  }

  #spawn(): void {
    const child = spawn(
      'redis-server',
      ['--port', String(this.port), '--bind', '127.0.0.1', '--dir', this.dir, '--appendonly', 'yes', '--save', '', '--protected-mode', 'yes', '--daemonize', 'no', '--loglevel', 'warning'],
      { stdio: 'ignore' },
    );
    this.#child = child;
    child.on('exit', (code, signal) => {
      if (this.#stopping) return;
      const now = Date.now();
      this.#restarts = this.#restarts.filter((t) => now - t < 60_000);
      if (this.#restarts.length >= 5) {
        this.logger.error({ code, signal }, 'embedded redis-server keeps exiting; not restarting');
        return;
      }
      this.#restarts.push(now);
      this.logger.warn({ code, signal }, 'embedded redis-server exited; restarting');
      this.#spawn();
    });
  }

  async stop(): Promise<void> {
    this.#stopping = true;
    fs.rmSync(path.join(this.dir, PORT_FILE), { force: true });
    const child = this.#child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    await new Promise<void>((resolve) => {
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      child.once('exit', () => {
        clearTimeout(timer);
        resolve();
      });
      child.kill('SIGTERM');
    });
  }
}

/**
 * Resolves the Redis URL to use: REDIS_URL when it answers; otherwise, with REDIS_EMBEDDED=auto, a single-server
 * REDIS_URL and redis-server installed, a supervised local server.
 */
export async function resolveRedis(
  opts: { redisUrl: string; redisEmbedded: 'auto' | 'never'; dataDir: string },
  logger: Logger,
): Promise<{ url: string; embedded?: EmbeddedRedis }> {
  if (await redisAnswers(opts.redisUrl)) return { url: opts.redisUrl };
  // The embedded server is a single node: a node standing in for an unreachable cluster would split the deployment.
  if (opts.redisEmbedded === 'never' || isClusterUrl(opts.redisUrl) || !hasRedisServer()) throw new EngineError('ENG_ERR_BOOT_REDIS_UNAVAILABLE');
  logger.warn('nothing answers at REDIS_URL; starting an embedded redis-server');
  const embedded = await EmbeddedRedis.start(opts.dataDir, logger);
  return { url: embedded.url, embedded };
}
