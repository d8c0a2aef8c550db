// The jobs bench's baseline: a bare BullMQ worker on the same Redis whose job does nothing but publish its id, as the
// service's process-conversation job ends by publishing `memory_created`. Its throughput is what BullMQ and Redis
// allow on this box with the same concurrency: the ceiling of any job pipeline built on them.
// Run as its own process: `node bare-bullmq.mjs --prefix P --queue Q --channel C --concurrency N`; prints "ready".
import { Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { parseArgs } from '../lib/report.mjs';

const { options } = parseArgs(process.argv.slice(2));
const concurrency = Number(options.concurrency ?? 2);
const { prefix, queue, channel } = options;
if (typeof prefix !== 'string' || typeof queue !== 'string' || typeof channel !== 'string' || !(concurrency >= 1)) {
  process.stderr.write('usage: node bare-bullmq.mjs --prefix P --queue Q --channel C [--concurrency N]\n');
  process.exit(2);
}
const url = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const connection = new Redis(url, { maxRetriesPerRequest: null });
const publisher = new Redis(url);
const worker = new Worker(
  queue,
  async (job) => {
    await publisher.publish(channel, JSON.stringify({ type: 'memory_created', uid: job.data.uid, conversationId: job.data.conversationId }));
  },
  { connection, prefix, concurrency },
);
worker.on('error', () => undefined);
await worker.waitUntilReady();
process.stdout.write('ready\n');
process.on('SIGTERM', async () => {
  await worker.close();
  publisher.disconnect();
  connection.disconnect();
  process.exit(0);
});
