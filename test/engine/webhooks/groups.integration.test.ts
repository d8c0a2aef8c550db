// New deliveries travel in groups: deliveries enqueued together share one job, and each still arrives once, signed
// with its owner's secret, with its own conversation; one that fails waits for its retry on a job of its own (same
// webhook-id, same bytes) while the rest are delivered; a group never sends a delivery its retry is waiting for.
import t from 'tap';
import type { Job } from 'bullmq';
import { startService, type TestService } from '../../helpers/service.js';
import { until, waitFor } from '../../helpers/until.js';
import { receiver, secretOf, setUserHook, verified, LINES } from '../../helpers/webhooks.js';
import { ConversationStatus } from '../../../engine/protocol.js';
import { DELIVER_GROUP_JOB, type DeliverGroupData } from '../../../engine/webhooks/queue.js';
import { RETRY_DELAYS_MS, RETRY_JITTER } from '../../../engine/webhooks/worker.js';

async function completed(s: TestService, uid: string): Promise<string> {
  const { conversations, users } = s.service.services;
  const now = s.clock.now();
  await users.ensure(uid, now, true);
  const at = new Date(now).toISOString();
  return (await conversations.create({ userId: uid, status: ConversationStatus.COMPLETED, startedAt: at, finishedAt: at, source: 'omi', language: 'en', segments: LINES, now })).id;
}

const delivered = (s: TestService, id: string): Promise<unknown> =>
  waitFor(async () => ((await s.service.services.webhookQueue.deliveries.get(id))?.state === 'delivered' ? true : undefined), { what: `${id} delivered`, timeoutMs: 15_000 });

t.test('deliveries enqueued together share group jobs; each arrives once, signed, with its own body; a failure waits on its own job', async (t) => {
  const api = await startService(t, { env: { ROLE: 'api', WEBHOOK_ALLOW_PRIVATE: 'on' } });
  const ok = await receiver(t);
  const flaky = await receiver(t, (_q, res, n) => res.writeHead(n === 1 ? 500 : 200).end('{}'));
  const users = ['u1', 'u2', 'u3', 'u4', 'u5', 'u6', 'u7', 'u8'];
  const conversation = new Map<string, string>();
  for (const uid of users) {
    conversation.set(uid, await completed(api, uid));
    await setUserHook(api, uid, uid === 'u8' ? flaky.url : ok.url);
  }
  const q = api.service.services.webhookQueue;
  const rows = (await Promise.all(users.map((uid) => q.enqueueConversationCreated(uid, conversation.get(uid)!, { reprocess: false, discarded: false })))).flat();
  t.equal(rows.length, users.length, 'one delivery per user');

  // No jobs node yet: what waits in Redis is the groups.
  const waiting = (await q.queue.getWaiting()) as Job<DeliverGroupData>[];
  t.ok(waiting.every((j) => j.name === DELIVER_GROUP_JOB), 'new deliveries wait in group jobs');
  t.ok(waiting.length < rows.length, `${rows.length} deliveries in ${waiting.length} jobs`);
  t.same(waiting.flatMap((j) => j.data.deliveries.map((d) => d.id)).sort(), rows.map((r) => r.id).sort(), 'every delivery in exactly one group');

  const jobs = await startService(t, { sameDeploymentAs: api, env: { ROLE: 'jobs' } });
  const failing = rows.find((r) => r.uid === 'u8')!;
  for (const r of rows) if (r !== failing) await delivered(jobs, r.id);
  t.equal(ok.received.length, users.length - 1, 'each sent once');
  for (const got of ok.received) {
    const uid = got.query.get('uid')!;
    const body = verified(got, await secretOf(api, 'user', uid));
    t.equal(body.id, conversation.get(uid), `${uid} got its own conversation`);
    t.equal(got.headers['webhook-id'], rows.find((r) => r.uid === uid)!.id);
  }

  const retry = await waitFor(async () => {
    const job = await q.queue.getJob(failing.id);
    return job && (await job.getState()) === 'delayed' ? job : undefined;
  }, { what: "the failed delivery's own job waiting" });
  t.match(await q.deliveries.get(failing.id), { state: 'retrying', attempts: 1, lastStatus: 500 });
  api.clock.advance(RETRY_DELAYS_MS[0] * (1 + RETRY_JITTER));
  await retry.promote();
  await delivered(jobs, failing.id);
  t.equal(flaky.received.length, 2);
  const [a, b] = flaky.received as [typeof flaky.received[0], typeof flaky.received[0]];
  t.equal(b.headers['webhook-id'], a.headers['webhook-id'], 'the same webhook-id');
  t.same(b.body, a.body, 'the same bytes');
  t.equal(verified(b, await secretOf(api, 'user', 'u8')).id, conversation.get('u8'));
});

t.test('announced again while its retry waits, a delivery is not sent before its time', async (t) => {
  const s = await startService(t, { env: { WEBHOOK_ALLOW_PRIVATE: 'on' } });
  const rx = await receiver(t, (_q, res, n) => res.writeHead(n === 1 ? 503 : 200).end('{}'));
  const id = await completed(s, 'u1');
  await setUserHook(s, 'u1', rx.url);
  const q = s.service.services.webhookQueue;
  const [d] = await q.enqueueConversationCreated('u1', id, { reprocess: false, discarded: false });
  const retry = await waitFor(async () => {
    const job = await q.queue.getJob(d!.id);
    return job && (await job.getState()) === 'delayed' ? job : undefined;
  }, { what: 'the retry waiting' });

  const again = await q.enqueueConversationCreated('u1', id, { reprocess: false, discarded: false });
  t.same(again.map((x) => x.id), [d!.id], 'the same delivery');
  await until(async () => {
    const n = await q.queue.getJobCounts('waiting', 'active');
    return (n.waiting ?? 0) + (n.active ?? 0) === 0;
  }, { what: 'the new group run' });
  t.equal(rx.received.length, 1, 'the group left it to its retry');
  t.match(await q.deliveries.get(d!.id), { state: 'retrying', attempts: 1 });

  s.clock.advance(RETRY_DELAYS_MS[0] * (1 + RETRY_JITTER));
  await retry.promote();
  await delivered(s, d!.id);
  t.equal(rx.received.length, 2);
});
