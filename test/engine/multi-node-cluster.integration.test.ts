// The multi-node scenario (two listen nodes, an api node and a jobs node as separate processes) on a three-master Redis
// Cluster: the same sessions, processing, webhooks, push, limits and revocation as on one Redis.
import t from 'tap';
import { runMultiNodeScenario } from '../helpers/multi-node.js';
import { startRedisCluster, type TestCluster } from '../helpers/redis-cluster.js';

// Several service processes start here (migrations, Redis, codec threads each): slower than one in-process service.
t.setTimeout(360_000);

// Started before and stopped after the deployment, whose processes close their connections first.
let cluster: TestCluster;
t.before(async () => {
  cluster = await startRedisCluster();
});
t.teardown(() => cluster?.stop());

t.test('the multi-node scenario on a Redis Cluster', async (t) => {
  const figures = await runMultiNodeScenario(t, { redisUrl: cluster.url });
  t.ok(figures.sessionsPerListenNode.every((n) => n > 0), `sessions per listen node: ${figures.sessionsPerListenNode.join(', ')}`);
  t.ok(figures.audioSecondsAtProvider >= figures.audioSecondsSent - 1e-6, 'no audio lost on its way to the provider');
  const perNode = await cluster.keysPerNode();
  t.ok(perNode.filter((n) => n > 0).length >= 2, `keys on more than one master (${perNode.join(', ')})`);
});
