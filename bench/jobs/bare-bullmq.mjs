// The jobs bench's baseline: a bare BullMQ worker whose job only publishes its id, the ceiling BullMQ and Redis allow any
// job pipeline at the same concurrency. Run: `node bare-bullmq.mjs --prefix P --queue Q --channel C --concurrency N`.
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
