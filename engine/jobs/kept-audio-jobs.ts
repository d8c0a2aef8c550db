// The transcribe-kept-audio jobs of one listen node: kept audio lives in its DATA_DIR, so only this node consumes them
// (a queue named after its persisted id, so a restart resumes them); a Redis set tells every node who still waits.
import { randomUUID } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { Queue, Worker } from 'bullmq';
import type { RedisClient } from '../redis.js';
import { bullConnection, bullPrefix, within } from './queues.js';
import { transcribeKept, type TranscribeKeptData, type TranscribeKeptDeps, type TranscribeKeptOutcome } from './transcribe-kept.js';

/** This node's id: created once under DATA_DIR and kept across restarts. */
export function nodeId(dataDir: string): string {
  const file = path.join(dataDir, 'node-id');
  try {
    const id = readFileSync(file, 'utf8').trim();
    if (/^[A-Za-z0-9-]{8,64}$/.test(id)) return id;
  } catch {
    // first start
  }
  const id = randomUUID();
  mkdirSync(dataDir, { recursive: true });
  writeFileSync(file, `${id}\n`);
  return id;
}

/** Which conversations still wait for kept audio, readable from every node (the processing job asks). */
export class KeptAudioIndex {
  constructor(
    readonly redis: RedisClient,
    readonly prefix: string,
  ) {}

  #key(conversationId: string): string {
    return `${this.prefix}:kept-audio:${conversationId}`;
  }

  async add(conversationId: string, keptId: string): Promise<void> {
    await this.redis.multi().sadd(this.#key(conversationId), keptId).expire(this.#key(conversationId), 7 * 86400).exec();
  }

  /** Marks one done; answers how many of the conversation's recordings still wait. */
  async done(conversationId: string, keptId: string): Promise<number> {
    const r = await this.redis.multi().srem(this.#key(conversationId), keptId).scard(this.#key(conversationId)).exec();
    return Number(r?.[1]?.[1] ?? 0);
  }

  async pending(conversationId: string): Promise<number> {
    return this.redis.scard(this.#key(conversationId));
  }
}

export interface KeptAudioJobsOptions {
  redisUrl: string;
  prefix: string;
  dataDir: string;
  index: KeptAudioIndex;
  deps: Omit<TranscribeKeptDeps, 'done'>;
}

export class KeptAudioJobs {
  readonly queueName: string;
  readonly #producer: RedisClient;
  readonly #consumer: RedisClient;
  readonly #queue: Queue<TranscribeKeptData>;
  readonly #worker: Worker<TranscribeKeptData, TranscribeKeptOutcome>;
  readonly #index: KeptAudioIndex;
  #closing = false;

  constructor(o: KeptAudioJobsOptions) {
    this.#index = o.index;
    this.queueName = `kept-audio-${nodeId(o.dataDir)}`;
    this.#producer = bullConnection(o.redisUrl, 'producer');
    this.#consumer = bullConnection(o.redisUrl, 'worker', () => this.#closing);
    this.#queue = new Queue<TranscribeKeptData>(this.queueName, { connection: this.#producer, prefix: bullPrefix(o.redisUrl, o.prefix) });
    this.#queue.on('error', () => undefined);
    const deps: TranscribeKeptDeps = { ...o.deps, done: (conversationId, keptId) => o.index.done(conversationId, keptId) };
    this.#worker = new Worker<TranscribeKeptData, TranscribeKeptOutcome>(this.queueName, (job, _token, signal) => transcribeKept(deps, job.data, signal), {
      connection: this.#consumer,
      prefix: bullPrefix(o.redisUrl, o.prefix),
      concurrency: 1,
    });
    this.#worker.on('error', () => undefined);
  }

  /** The producer side of this node's queue (counts for /metrics). */
  get queue(): Pick<Queue, 'getJobCounts' | 'getJobs'> {
    return this.#queue;
  }

  /** Schedules one kept recording; retried with backoff for about a day while no engine is usable. */
  async add(data: TranscribeKeptData): Promise<void> {
    await this.#index.add(data.conversationId, data.keptId);
    await this.#queue.add('transcribe-kept-audio', data, {
      jobId: `kept-${data.keptId.replace('/', '-')}`,
      attempts: 16,
      backoff: { type: 'exponential', delay: 5000 },
      removeOnComplete: true,
      removeOnFail: 1000,
    });
  }

  async close(timeoutMs = 5000): Promise<void> {
    this.#closing = true;
    await within(this.#worker.close(this.#consumer.status !== 'ready'), timeoutMs);
    await within(this.#queue.close(), 1000);
    for (const r of [this.#consumer, this.#producer]) {
      await within(r.quit(), 500);
      r.disconnect();
    }
  }
}
