// jobs_queued and jobs_oldest_waiting_seconds on a real BullMQ queue in the test Redis: the counts and the age an
// operator reads, and a scrape that still answers when a queue's Redis does not.
import t from 'tap';
import { randomUUID } from 'node:crypto';
import client from 'prom-client';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { registerQueueMetrics } from '../../../engine/jobs/queue-metrics.js';

const REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

t.test('counts waiting, delayed and failed jobs per queue and ages the oldest waiting; a queue that never answers is left out', async (t) => {
  const connection = new Redis(REDIS_URL, { maxRetriesPerRequest: null });
  const prefix = `test-qm-${randomUUID()}`;
  const queue = new Queue('processing', { connection, prefix });
  t.teardown(async () => {
    await queue.obliterate({ force: true });
    await queue.close();
    await connection.quit();
  });
  const registry = new client.Registry();
  const stuck = { getJobCounts: () => new Promise<Record<string, number>>(() => undefined), getJobs: () => new Promise<never>(() => undefined) };
  // BullMQ stamps jobs with wall time; the scrape reads "now" as 90 s after the first job was added.
  let now = Date.now();
  registerQueueMetrics(registry, () => [{ name: 'processing', queue }, { name: 'stuck', queue: stuck }], 1000, () => now);

  t.match(await registry.metrics(), /^jobs_oldest_waiting_seconds\{queue="processing"\} 0$/m, 'nothing waits: age 0');
  const first = await queue.add('a', {});
  now = first.timestamp + 90_000;
  await queue.add('b', {});
  await queue.add('c', {}, { delay: 60_000 });
  const text = await registry.metrics();
  t.match(text, /^jobs_queued\{queue="processing",state="waiting"\} 2$/m, 'two waiting');
  t.match(text, /^jobs_queued\{queue="processing",state="delayed"\} 1$/m, 'one delayed');
  t.match(text, /^jobs_queued\{queue="processing",state="active"\} 0$/m);
  t.match(text, /^jobs_queued\{queue="processing",state="failed"\} 0$/m);
  t.match(text, /^jobs_oldest_waiting_seconds\{queue="processing"\} 90$/m, 'the oldest waiting job, not the newest, sets the age');
  t.notMatch(text, /queue="stuck"/, 'the queue that never answered is left out of this scrape');

  await queue.drain();
  const after = await registry.metrics();
  t.match(after, /^jobs_queued\{queue="processing",state="waiting"\} 0$/m, 'drained: nothing waits');
});
