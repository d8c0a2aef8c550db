// Queue depth on /metrics (jobs waiting, running, delayed, failed, read from Redis at each scrape), so an operator sees
// a processing backlog building (JOB_CONCURRENCY too low, a slow LLM) before users notice late summaries.
import client from 'prom-client';
import type { Queue } from 'bullmq';

/** The states reported, as BullMQ names them. */
export const QUEUE_STATES = ['waiting', 'active', 'delayed', 'failed'] as const;

/** A queue by the label it is reported under. */
export interface NamedQueue {
  name: string;
  queue: Pick<Queue, 'getJobCounts'>;
}

/**
 * Registers `jobs_queued{queue,state}`. `queues` is read at each scrape (a node's queues may come later, or not at
 * all for its role). A queue whose counts do not come within `timeoutMs` (Redis down or slow) is left out of that
 * scrape rather than holding /metrics up; the rest of the page is still served.
 */
export function registerQueueMetrics(registry: client.Registry, queues: () => NamedQueue[], timeoutMs = 1000): void {
  new client.Gauge({
    name: 'jobs_queued',
    help: 'Jobs per queue and state (waiting, active, delayed, failed), read from Redis at each scrape: "processing" is conversation processing, "transcribe_kept_audio" this node\'s kept audio.',
    labelNames: ['queue', 'state'],
    registers: [registry],
    async collect() {
      this.reset();
      await Promise.all(
        queues().map(async ({ name, queue }) => {
          let timer: NodeJS.Timeout | undefined;
          const late = new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), timeoutMs)));
          const counts = await Promise.race([queue.getJobCounts(...QUEUE_STATES).catch(() => undefined), late]);
          clearTimeout(timer);
          if (counts) for (const state of QUEUE_STATES) this.set({ queue: name, state }, counts[state] ?? 0);
        }),
      );
    },
  });
}
