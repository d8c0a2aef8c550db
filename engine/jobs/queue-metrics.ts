// Queue depth and age on /metrics (jobs waiting, running, delayed, failed, and how long the oldest waiting job has
// waited, read from Redis at each scrape), so an operator sees a backlog building (JOB_CONCURRENCY too low, a slow
// LLM, a stuck endpoint) before users notice late summaries.
import client from 'prom-client';
import type { Queue } from 'bullmq';

/** The states reported, as BullMQ names them. */
export const QUEUE_STATES = ['waiting', 'active', 'delayed', 'failed'] as const;

/** A queue by the label it is reported under. */
export interface NamedQueue {
  name: string;
  queue: Pick<Queue, 'getJobCounts' | 'getJobs'>;
}

/** What a scrape reads of one queue, or undefined when Redis did not answer within `timeoutMs`. */
async function within<T>(p: Promise<T>, timeoutMs: number): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), timeoutMs)));
  try {
    return await Promise.race([p.catch(() => undefined), late]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Seconds the oldest job of the `wait` list has waited (0 with none). Jobs are pushed on the list's head, so the
 * oldest is its tail; it became due when added plus its delay, or, retried, when its last attempt began plus its
 * backoff.
 */
async function oldestWaitingS(queue: NamedQueue['queue'], now: number): Promise<number> {
  const [job] = await queue.getJobs(['wait'], 0, 0, true);
  if (!job) return 0;
  const due = (job.processedOn ?? job.timestamp) + (job.delay ?? 0);
  return Math.max(0, now - due) / 1000;
}

/**
 * Registers `jobs_queued{queue,state}` and `jobs_oldest_waiting_seconds{queue}`. `queues` is read at each scrape (a
 * node's queues may come later, or not at all for its role). A queue whose answer does not come within `timeoutMs`
 * (Redis down or slow) is left out of that scrape rather than holding /metrics up; the rest of the page is still
 * served. `now` is wall time: BullMQ stamps its jobs with it.
 */
export function registerQueueMetrics(registry: client.Registry, queues: () => NamedQueue[], timeoutMs = 1000, now: () => number = Date.now): void {
  new client.Gauge({
    name: 'jobs_queued',
    help: 'Jobs per queue and state (waiting, active, delayed, failed), read from Redis at each scrape: processing (conversations), webhooks, notifications (pushes), day_summaries, sync, and transcribe_kept_audio (this node\'s kept audio).',
    labelNames: ['queue', 'state'],
    registers: [registry],
    async collect() {
      this.reset();
      await Promise.all(
        queues().map(async ({ name, queue }) => {
          const counts = await within(queue.getJobCounts(...QUEUE_STATES), timeoutMs);
          if (counts) for (const state of QUEUE_STATES) this.set({ queue: name, state }, counts[state] ?? 0);
        }),
      );
    },
  });
  new client.Gauge({
    name: 'jobs_oldest_waiting_seconds',
    help: 'Per queue, how long its oldest waiting job (due, not yet taken by a worker) has waited, read from Redis at each scrape; 0 with none waiting.',
    labelNames: ['queue'],
    registers: [registry],
    async collect() {
      this.reset();
      const at = now();
      await Promise.all(
        queues().map(async ({ name, queue }) => {
          const s = await within(oldestWaitingS(queue, at), timeoutMs);
          if (s !== undefined) this.set({ queue: name }, s);
        }),
      );
    },
  });
}
