// The day summary's schedule on jobs nodes: a BullMQ job scheduler fires at minute 0 of every UTC hour (one job per
// hour however many nodes register it); that run picks the users due and queues one job per user and date, which
// the jobs nodes share, so a run survives a restart and spreads across nodes.
import { createHash } from 'node:crypto';
import { Queue, Worker, type Job } from 'bullmq';
import type { RedisClient } from '../redis.js';
import type { Services } from '../services.js';
import { bullConnection, bullPrefix, closeWorker, within } from '../jobs/queues.js';
import { daySummaries, type DayOutcome } from './day-summary.js';

export const SCHEDULES_QUEUE = 'schedules';
export const HOURLY_JOB = 'day-summary-hour';
export const USER_JOB = 'day-summary';
/** The job scheduler's id: every node upserts the same one. */
export const HOURLY_SCHEDULER_ID = 'day-summary-hourly';
/** Users summarised at once by one jobs process (each may wait on the LLM for seconds). */
export const DAY_SUMMARY_CONCURRENCY = 16;

const HOUR_MS = 3600_000;

export type ScheduleJobData = { uid: string; date: string } | Record<string, never>;

/**
 * A user's job is kept a day after it ends: its fixed id makes a second run of the same hour add nothing. The per-user
 * lock in Redis is what SPEC counts on; this only saves the work.
 */
const USER_JOB_OPTIONS = { removeOnComplete: { age: 26 * 3600 }, removeOnFail: { age: 26 * 3600 } } as const;

export const userJobId = (uid: string, date: string): string => 'ds_' + createHash('sha256').update(`${uid}\n${date}`).digest('hex').slice(0, 32);

export class DaySummarySchedule {
  readonly queue: Queue<ScheduleJobData>;
  readonly worker: Worker<ScheduleJobData, DayOutcome | number>;
  readonly #producer: RedisClient;
  readonly #consumer: RedisClient;
  readonly #s: Services;
  #closing = false;

  constructor(o: { services: Services; redisUrl: string; concurrency?: number }) {
    this.#s = o.services;
    const prefix = bullPrefix(o.redisUrl, o.services.config.redisPrefix);
    this.#producer = bullConnection(o.redisUrl, 'producer');
    this.#consumer = bullConnection(o.redisUrl, 'worker', () => this.#closing);
    this.queue = new Queue<ScheduleJobData>(SCHEDULES_QUEUE, { connection: this.#producer, prefix });
    this.queue.on('error', () => undefined);
    this.worker = new Worker<ScheduleJobData, DayOutcome | number>(SCHEDULES_QUEUE, (job) => this.#run(job), { connection: this.#consumer, prefix, concurrency: o.concurrency ?? DAY_SUMMARY_CONCURRENCY });
    this.worker.on('error', () => undefined);
  }

  /** Registers the hourly scheduler (the same id from every node: BullMQ keeps one). */
  async start(): Promise<void> {
    await this.queue.upsertJobScheduler(HOURLY_SCHEDULER_ID, { pattern: '0 * * * *', tz: 'UTC' }, { name: HOURLY_JOB, data: {}, opts: { removeOnComplete: true, removeOnFail: 100 } });
  }

  /** Queues the users due at the UTC hour `hourMs`; answers how many. */
  async runHour(hourMs: number): Promise<number> {
    const due = await daySummaries(this.#s).due(hourMs);
    await this.queue.addBulk(due.map((d) => ({ name: USER_JOB, data: d, opts: { ...USER_JOB_OPTIONS, jobId: userJobId(d.uid, d.date) } })));
    return due.length;
  }

  async #run(job: Job<ScheduleJobData>): Promise<DayOutcome | number> {
    if (job.name === USER_JOB && 'uid' in job.data) return daySummaries(this.#s).deliver(job.data.uid, job.data.date);
    // The hour the run belongs to, even when it starts a few seconds early or late.
    return this.runHour(Math.floor((this.#s.clock.now() + 5 * 60_000) / HOUR_MS) * HOUR_MS);
  }

  async close(timeoutMs = 5000): Promise<void> {
    this.#closing = true;
    await closeWorker(this.worker, this.#consumer, timeoutMs);
    await within(this.queue.close(), 1000);
    await within(this.#producer.quit(), 500);
    this.#producer.disconnect();
  }
}
