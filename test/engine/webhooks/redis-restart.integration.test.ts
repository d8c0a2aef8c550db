// Nothing enqueued is lost when Redis restarts with persistence on: a delivery enqueued while no jobs node runs,
// Redis killed and started again on its append-only file, then a jobs node delivers it under the same webhook-id.
import t from 'tap';
import { startService } from '../../helpers/service.js';
import { persistentRedis, portAnswers } from '../../helpers/ports.js';
import { until, waitFor } from '../../helpers/until.js';
import { receiver, secretOf, setUserHook, verified, LINES } from '../../helpers/webhooks.js';
import { ConversationStatus } from '../../../engine/protocol.js';

t.test('a delivery enqueued before Redis was killed is delivered after it restarts', async (t) => {
  const redis = await persistentRedis(t);
  const env = { REDIS_URL: redis.url, WEBHOOK_ALLOW_PRIVATE: 'on' };
  const api = await startService(t, { env: { ...env, ROLE: 'api' } });
  const rx = await receiver(t);
  const { conversations, users, webhookQueue } = api.service.services;
  await users.ensure('u1', api.clock.now(), true);
  const now = new Date(api.clock.now()).toISOString();
  const c = await conversations.create({ userId: 'u1', status: ConversationStatus.COMPLETED, startedAt: now, finishedAt: now, source: 'omi', language: 'en', segments: LINES, now: api.clock.now() });
  await setUserHook(api, 'u1', rx.url);
  const [d] = await webhookQueue.enqueueConversationCreated('u1', c.id, { reprocess: false, discarded: false });
  t.ok(d, 'one delivery enqueued');
  // As after a normal announcement: the store no longer asks for it, so only the queue in Redis can deliver it.
  await conversations.markFirstProcessed(c.id, api.clock.now());

  await redis.kill();
  t.notOk(await portAnswers(redis.port), 'Redis is down');
  await redis.start();

  await startService(t, { sameDeploymentAs: api, env: { ROLE: 'jobs' } });
  await until(() => rx.received.length >= 1, { what: 'the delivery after the restart', timeoutMs: 30_000 });
  t.equal(rx.received.length, 1, 'delivered once');
  t.equal(rx.received[0]!.headers['webhook-id'], d!.id, 'under the webhook-id it was enqueued with');
  t.equal(verified(rx.received[0]!, await secretOf(api, 'user', 'u1')).id, c.id);
  const row = await waitFor(async () => {
    const r = await webhookQueue.deliveries.get(d!.id);
    return r?.state === 'delivered' ? r : undefined;
  }, { what: 'recorded delivered' });
  t.equal(row.attempts, 1);
});
