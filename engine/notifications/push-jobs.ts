// Push sends as BullMQ jobs on the `notifications` queue: one job per notification and device token (ids only), so a
// restart loses none; 429, 5xx and network failures retry with backoff, a token the push service disowns is removed.
import { Queue, UnrecoverableError, Worker, type Job } from 'bullmq';
import client from 'prom-client';
import type { RedisClient } from '../redis.js';
import type { Logger } from '../logger.js';
import type { NotificationsRepository } from '../db/notifications.js';
import type { UserSettingsRepository } from '../db/user-settings.js';
import { bullConnection, bullPrefix, closeWorker, within } from '../jobs/queues.js';
import type { FcmClient } from './fcm.js';

export const NOTIFICATIONS_QUEUE = 'notifications';
const PUSH_JOB = 'push';

/** Payload of a push job: the outbox row and the device token, by id. */
export interface PushJobData {
  notificationId: number;
  tokenId: string;
}

export type PushOutcome = 'sent' | 'token_removed' | 'gone';

/** Sends one node makes at once; each mostly waits on the push service. */
export const PUSH_CONCURRENCY = 32;
/** Tries of one send: the first and the retries (about 8.5 minutes of backoff in all). */
export const PUSH_ATTEMPTS = 9;
/** First retry wait; each next one doubles, lengthened by up to 10%, and never shorter than the server's Retry-After. */
export const PUSH_RETRY_BASE_MS = 2_000;

/** The wait before retry `attemptsMade` (1 after the first failure), at least `retryAfterS` when the server gave one. */
export function pushRetryDelayMs(attemptsMade: number, retryAfterS: number | undefined, random: () => number = Math.random): number {
  const base = PUSH_RETRY_BASE_MS * 2 ** (Math.max(attemptsMade, 1) - 1);
  return Math.max(Math.round(base * (1 + 0.1 * random())), (retryAfterS ?? 0) * 1000);
}

/** A send worth retrying; carries the server's Retry-After to the backoff. */
class PushRetry extends Error {
  constructor(readonly status: number, readonly retryAfterS: number | undefined) {
    super(`push send answered ${status}`);
    this.name = 'PushRetry';
  }
}

/** The producer side, on every node. */
export class PushQueue {
  readonly #connection: RedisClient;
  readonly queue: Queue<PushJobData>;

  constructor(o: { redisUrl: string; prefix: string }) {
    this.#connection = bullConnection(o.redisUrl, 'producer');
    this.queue = new Queue<PushJobData>(NOTIFICATIONS_QUEUE, { connection: this.#connection, prefix: bullPrefix(o.redisUrl, o.prefix) });
    this.queue.on('error', () => undefined);
  }

  /** One job per token; the job id makes a second enqueue of the same pair a no-op. */
  async add(notificationId: number, tokenIds: readonly string[]): Promise<void> {
    if (tokenIds.length === 0) return;
    await this.queue.addBulk(tokenIds.map((tokenId) => ({
      name: PUSH_JOB,
      data: { notificationId, tokenId },
      opts: { jobId: `${notificationId}-${tokenId}`, attempts: PUSH_ATTEMPTS, backoff: { type: 'push-retry' }, removeOnComplete: true, removeOnFail: 1000 },
    })));
  }

  async close(): Promise<void> {
    await within(this.queue.close(), 1000);
    await within(this.#connection.quit(), 500);
    this.#connection.disconnect();
  }
}

export interface PushWorkerOptions {
  redisUrl: string;
  prefix: string;
  fcm: FcmClient;
  notifications: NotificationsRepository;
  settings: UserSettingsRepository;
  logger: Logger;
  concurrency?: number;
  /** Where sends are counted by outcome (push_sends_total). */
  registry?: client.Registry;
}

/** What became of one send attempt, as push_sends_total counts it. */
type SendResult = PushOutcome | 'retry' | 'refused' | 'error';
const SEND_RESULTS: readonly SendResult[] = ['sent', 'token_removed', 'gone', 'retry', 'refused', 'error'];

/** push_sends_total, one child per outcome. */
function sendCounter(registry: client.Registry | undefined): (r: SendResult) => void {
  if (!registry) return () => undefined;
  const counter = new client.Counter({
    name: 'push_sends_total',
    help: 'Push send attempts by outcome: sent, token_removed (the push service disowned the token), gone (device or notification gone since), retry (429, 5xx, network: tried again later), refused (the push service refused it for good), error (the store failed).',
    labelNames: ['outcome'],
    registers: [registry],
  });
  // Every outcome from 0, so rate() over a first failure has a series to start from.
  for (const r of SEND_RESULTS) counter.inc({ outcome: r }, 0);
  const children = new Map(SEND_RESULTS.map((r) => [r, counter.labels(r)]));
  return (r) => children.get(r)?.inc();
}

/** The consumer, on jobs nodes. */
export class PushWorker {
  readonly #connection: RedisClient;
  #closing = false;
  readonly worker: Worker<PushJobData, PushOutcome>;

  constructor(o: PushWorkerOptions) {
    this.#connection = bullConnection(o.redisUrl, 'worker', () => this.#closing);
    const count = sendCounter(o.registry);
    const send = async (job: Job<PushJobData>): Promise<PushOutcome> => {
      try {
        const outcome = await sendPush(o, job);
        count(outcome);
        return outcome;
      } catch (err) {
        count(err instanceof PushRetry ? 'retry' : err instanceof UnrecoverableError ? 'refused' : 'error');
        throw err;
      }
    };
    this.worker = new Worker<PushJobData, PushOutcome>(NOTIFICATIONS_QUEUE, send, {
      connection: this.#connection,
      prefix: bullPrefix(o.redisUrl, o.prefix),
      concurrency: o.concurrency ?? PUSH_CONCURRENCY,
      settings: { backoffStrategy: (attemptsMade: number, _type?: string, err?: Error) => pushRetryDelayMs(attemptsMade, err instanceof PushRetry ? err.retryAfterS : undefined) },
    });
    this.worker.on('error', () => undefined);
  }

  async close(timeoutMs = 5000): Promise<void> {
    this.#closing = true;
    await closeWorker(this.worker, this.#connection, timeoutMs);
  }
}

async function sendPush(o: PushWorkerOptions, job: Job<PushJobData>): Promise<PushOutcome> {
  const { notificationId, tokenId } = job.data;
  const [n, token] = await Promise.all([o.notifications.get(notificationId), o.settings.token(tokenId)]);
  // The device was unregistered, or moved to another account, since the job was queued.
  if (!n || !token || token.uid !== n.uid) return 'gone';
  const out = await o.fcm.send(token.token, { title: n.title, body: n.body, data: { ...n.data, notification_id: String(n.id) } });
  switch (out.kind) {
    case 'sent':
      return 'sent';
    case 'invalid_token':
      await o.settings.deleteTokenById(token.id);
      o.logger.info({ tokenId: token.id, code: out.code }, 'push token removed: the push service no longer knows it');
      return 'token_removed';
    case 'retry':
      throw new PushRetry(out.status, out.retryAfterS);
    case 'failed':
      o.logger.warn({ notificationId, status: out.status, code: out.code }, 'push refused');
      throw new UnrecoverableError(`push refused: ${out.code}`);
  }
}
