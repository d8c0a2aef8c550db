// The service on a three-master Redis Cluster: two nodes of one deployment (ROLE=all and ROLE=api) share it for
// the live session and its processing job, the session events between nodes, the conversation-created webhook, rate
// limits, key revocation, data versions and a push; and the keys land on more than one master.
import t from 'tap';
import { startService, type TestService } from '../helpers/service.js';
import { startRedisCluster, type TestCluster } from '../helpers/redis-cluster.js';
import { bearer } from '../helpers/http.js';
import { advance, open } from '../helpers/listen.js';
import { until, waitFor } from '../helpers/until.js';
import { speak, silence, concat } from '../helpers/speech.js';
import { receiver, secretOf, setUserHook, verified } from '../helpers/webhooks.js';
import { startFakeDeepgram, type ScriptedWord } from '../fakes/deepgram-server.js';
import { startFakeFcm, writeServiceAccount } from '../fakes/fcm-server.js';
import { createApp, direct, install } from '../helpers/notifications.js';
import { createRedis, subscribersReached, type RedisClient } from '../../engine/redis.js';

const said = (at: number, ...texts: string[]): ScriptedWord[] => texts.map((word, i) => ({ word, start: at + i * 0.3, end: at + i * 0.3 + 0.25 }));
const WORDS = said(0.3, 'remember', 'to', 'buy', 'milk');

let cluster: TestCluster;
t.before(async () => {
  cluster = await startRedisCluster();
});
t.teardown(() => cluster?.stop());

async function lookups(s: TestService, result: string): Promise<number> {
  const metric = await s.service.services.registry.getSingleMetric('http_response_cache_lookups_total')!.get();
  return metric.values.find((v) => v.labels.result === result)?.value ?? 0;
}

t.test('two nodes on a Redis Cluster', async (t) => {
  const fake = await startFakeDeepgram({ sweepEveryMs: 0 });
  fake.fallback = { kind: 'accept', results: [{ afterS: 1.5, words: WORDS }] };
  t.teardown(() => fake.close());
  const account = writeServiceAccount();
  const fcm = await startFakeFcm(account);
  t.teardown(() => fcm.close());
  const all = await startService(t, {
    env: {
      REDIS_URL: cluster.url,
      STT_PROVIDERS: 'provider_a', PROVIDER_A_URL: fake.url, PROVIDER_A_API_KEY: 'test-key',
      WEBHOOK_ALLOW_PRIVATE: 'on',
      RATE_LIMIT_PER_MINUTE: '4',
      FCM_SERVICE_ACCOUNT_FILE: account.file, FCM_TOKEN_URL: fcm.tokenUrl, FCM_BASE_URL: fcm.url,
    },
  });
  const api = await startService(t, { sameDeploymentAs: all, env: { ROLE: 'api' } });
  const redis: RedisClient = createRedis(cluster.url);
  t.teardown(() => redis.disconnect());
  t.equal(redis.isCluster, true, 'REDIS_URL made a cluster client');
  t.equal((await all.req('/health')).status, 200, 'the health check answers on the cluster');

  await t.test('a live session ends in a processed conversation and its webhook', async (t) => {
    const rx = await receiver(t);
    await setUserHook(all, 'u1', rx.url);
    const c = await open(all, { uid: 'u1', codec: 'pcm16', sample_rate: '16000' });
    await c.ready();
    const pcm = concat(silence(0.2), speak(t.testdir(), 'Remember to buy milk.'), silence(1));
    for (let i = 0; i < pcm.length; i += 1600) c.ws.send(new Uint8Array(pcm.buffer, i * 2, Math.min(1600, pcm.length - i) * 2).slice());
    const actor = all.service.sessions.sessionsOf('u1')[0]!;
    const segments = await waitFor(async () => {
      await advance(all, 600);
      const m = await c.json((x) => Array.isArray(x), 200).catch(() => undefined);
      return m?.some((s: { text: string }) => /buy milk/.test(s.text)) ? m : undefined;
    }, { what: 'the spoken words as segments', timeoutMs: 20_000 });
    t.ok(segments, 'the provider’s words reached the device');
    const conversationId = actor.conversationId!;
    t.ok(conversationId, 'the speech opened a conversation');

    // Ended on the other node: the session hears of it through pub/sub, the jobs node processes it through BullMQ.
    const ended = await api.req('/v1/conversations', { method: 'POST', headers: bearer(await api.token('u1')), body: {} });
    t.equal(ended.status, 200, 'the conversation is ended from the other node');
    t.equal(ended.json.memory.id, conversationId);
    const created = await c.json((m) => m.type === 'memory_created', 30_000);
    t.equal(created.memory.id, conversationId, 'the device hears it processed');
    t.equal(created.memory.status, 'completed');
    c.close();
    await c.closed;

    await until(() => rx.received.length > 0, { what: 'the conversation-created webhook', timeoutMs: 30_000 });
    const body = verified(rx.received[0]!, await secretOf(all, 'user', 'u1'));
    t.equal(body.id, conversationId, 'the webhook names the conversation');
    t.match(body.transcript_segments, [{ text: /remember to buy milk/i }], 'with its transcript');
    const counts = await all.service.services.webhookQueue.queue.getJobCounts('waiting', 'active', 'completed', 'failed');
    t.equal(counts.failed ?? 0, 0, 'no webhook job failed');
  });

  await t.test('rate limits are shared by both nodes; a revoked key is refused at once by the other node', async (t) => {
    const key = bearer(await all.devKey('u2', ['memories:read']));
    const codes: number[] = [];
    for (const node of [all, api, all, api, all]) codes.push((await node.req('/v1/dev/user/memories', { headers: key })).status);
    t.same(codes, [200, 200, 200, 200, 429], 'the fifth request in the minute, on either node, is over the limit of 4');

    const other = bearer(await all.devKey('u3', ['memories:read']));
    t.equal((await api.req('/v1/dev/user/memories', { headers: other })).status, 200, 'the api node verified and cached the key');
    const keys = (await all.req('/v1/dev/keys', { headers: bearer(await all.token('u3')) })).json as { id: string }[];
    t.equal((await all.req(`/v1/dev/keys/${keys[0]!.id}`, { method: 'DELETE', headers: bearer(await all.token('u3')) })).status, 204);
    await until(async () => (await api.req('/v1/dev/user/memories', { headers: other })).status === 401, { what: 'the revocation heard by the api node', timeoutMs: 10_000 });
    t.pass('the api node refuses the revoked key before its cache entry expires');
  });

  await t.test('a cached answer is reused until a write changes the user’s data version', async (t) => {
    const key = bearer(await all.devKey('u4', ['memories:read', 'memories:write']));
    const hits = await lookups(all, 'hit');
    t.same((await all.req('/v1/dev/user/memories', { headers: key })).json, []);
    t.same((await all.req('/v1/dev/user/memories', { headers: key })).json, []);
    t.equal(await lookups(all, 'hit'), hits + 1, 'the second read is a hit');
    const misses = await lookups(all, 'miss');
    t.equal((await api.req('/v1/dev/user/memories', { method: 'POST', headers: key, body: { content: 'Likes green tea' } })).status, 200, 'a write on the other node');
    const after = (await all.req('/v1/dev/user/memories', { headers: key })).json as { content: string }[];
    t.same(after.map((m) => m.content), ['Likes green tea'], 'the write is seen at once');
    t.equal(await lookups(all, 'miss'), misses + 1, 'a miss under the new version');
    t.equal(await redis.exists(`${all.env.REDIS_PREFIX}:dv:{u4}`), 1, 'the version key carries the user id as hash tag');
  });

  await t.test('a direct notification goes out through the notifications queue to FCM', async (t) => {
    const app = await createApp(all, 'dev', 'Hydrate');
    await install(all, 'u5', app.id);
    t.equal((await all.req('/v1/users/fcm-token', { method: 'POST', headers: bearer(await all.token('u5')), body: { fcm_token: 'cPhone1234567890abcdef:APA91bFirstDevice' } })).status, 200);
    const res = await direct(all, app.id, { uid: 'u5', message: 'Drink water' }, bearer(app.secret));
    t.equal(res.status, 200);
    await until(() => fcm.sent.length === 1, { what: 'the push', timeoutMs: 20_000 });
    t.same([fcm.sent[0]!.title, fcm.sent[0]!.body], ['Hydrate says', 'Drink water']);
  });

  await t.test('the keys are spread over the masters; BullMQ keys share one slot', async (t) => {
    const perNode = await cluster.keysPerNode();
    t.ok(perNode.filter((n) => n > 0).length >= 2, `keys on more than one master (${perNode.join(', ')})`);
    const prefix = all.env.REDIS_PREFIX!;
    t.ok(await redis.exists(`{${prefix}}:processing:meta`), 'the processing queue lives under the hash-tagged prefix');
    // A node counts only its own subscribers at PUBLISH: both nodes' are found by asking every node.
    const channel = `${prefix}:api-keys:revoked`;
    t.equal(await subscribersReached(redis, channel, await redis.publish(channel, 'no-such-key-hash')), 2, 'both nodes subscribe, whichever node each chose');
    const metrics = (await all.req('/metrics')).text;
    t.match(metrics, /jobs_queued\{[^}]*queue="webhooks"/, 'queue metrics read from the cluster');
  });
});
