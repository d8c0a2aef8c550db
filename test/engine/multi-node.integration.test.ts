// Several service processes as one deployment: two listen nodes, an api node and a jobs node on one PostgreSQL schema
// and one Redis (the local one here; the same scenario runs against a Redis Cluster URL).
import t from 'tap';
import { runMultiNodeScenario } from '../helpers/multi-node.js';

// Several service processes start here (migrations, Redis, codec threads each): slower than one in-process service.
t.setTimeout(360_000);

t.test('sessions on both listen nodes, processing once on the jobs node, shared limits and revocation', async (t) => {
  const figures = await runMultiNodeScenario(t, { redisUrl: process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379' });
  t.ok(figures.sessionsPerListenNode.every((n) => n > 0), `sessions per listen node: ${figures.sessionsPerListenNode.join(', ')}`);
  t.ok(figures.audioSecondsAtProvider >= figures.audioSecondsSent - 1e-6, 'no audio lost on its way to the provider');
  t.comment(`conversations ${figures.conversations}, ${figures.jobsPerSecond.toFixed(2)} processed per second (end of recording to memory_created), webhook attempts ${figures.webhookAttempts}, audio ${figures.audioSecondsSent.toFixed(1)} s sent, ${figures.audioSecondsAtProvider.toFixed(1)} s at the provider`);
});
