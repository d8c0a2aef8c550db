// Pushes through FCM HTTP v1 against a faithful local fake: the service-account assertion checked by the fake's token
// endpoint (signature with the account's public key, audience, scope), the access token reused until shortly before
// it expires, a send per registered device, a token FCM answers UNREGISTERED or INVALID_ARGUMENT removed, and 429 /
// 5xx answers retried from the `notifications` queue until the push goes out.
import t, { type Test } from 'tap';
import { Queue } from 'bullmq';
import { startService, type TestService } from '../../helpers/service.js';
import { bearer } from '../../helpers/http.js';
import { until, waitFor } from '../../helpers/until.js';
import { startFakeFcm, writeServiceAccount, type FakeFcm } from '../../fakes/fcm-server.js';
import { NOTIFICATIONS_QUEUE } from '../../../engine/notifications/push-jobs.js';

const PHONE = 'cPhone1234567890abcdef:APA91bFirstDevice';
const WATCH = 'cWatch1234567890abcdef:APA91bSecondDevice';
const GONE = 'cGone01234567890abcdef:APA91bUninstalledApp';
const BUSY = 'cBusy01234567890abcdef:APA91bRetriedDevice';
const MALFORMED = 'not a token';

async function setup(t: Test, fcm: FakeFcm, file: string): Promise<{ s: TestService; app: { id: string; secret: string } }> {
  const s = await startService(t, { env: { FCM_SERVICE_ACCOUNT_FILE: file, FCM_TOKEN_URL: fcm.tokenUrl, FCM_BASE_URL: fcm.url } });
  const dev = bearer(await s.token('dev'));
  const created = await s.req('/v1/apps', { method: 'POST', headers: dev, body: { name: 'Hydrate', capabilities: [], private: false } });
  const app = { id: created.json.id as string, secret: created.json.secret as string };
  await s.req(`/v1/apps/${app.id}/install`, { method: 'POST', headers: bearer(await s.token('alice')) });
  return { s, app };
}

async function register(s: TestService, uid: string, token: string): Promise<void> {
  const res = await s.req('/v1/users/fcm-token', { method: 'POST', headers: bearer(await s.token(uid)), body: { fcm_token: token } });
  if (res.status !== 200) throw new Error(`token registration failed: ${res.status}`);
}

async function notify(s: TestService, app: { id: string; secret: string }, message: string): Promise<void> {
  const res = await s.req(`/v2/integrations/${app.id}/notification?uid=alice&message=${encodeURIComponent(message)}`, { method: 'POST', headers: bearer(app.secret) });
  if (res.status !== 200) throw new Error(`notification refused: ${res.status} ${res.text}`);
}

/** push_sends_total on /metrics, by outcome. */
async function sends(s: TestService): Promise<Record<string, number>> {
  const text = (await s.req('/metrics')).text;
  return Object.fromEntries([...text.matchAll(/^push_sends_total\{outcome="(\w+)"\} (\d+)$/gm)].map((m) => [m[1]!, Number(m[2])]));
}

/** Runs the queue's delayed retries now rather than after their backoff. */
async function promoteDelayed(queue: Queue): Promise<number> {
  const delayed = await queue.getDelayed();
  await Promise.all(delayed.map((j) => j.promote().catch(() => undefined)));
  return delayed.length;
}

t.test('pushes reach every device, with one access token until it nears expiry', async (t) => {
  const account = writeServiceAccount();
  const fcm = await startFakeFcm(account);
  t.teardown(() => fcm.close());
  const { s, app } = await setup(t, fcm, account.file);
  await register(s, 'alice', PHONE);
  await register(s, 'alice', WATCH);
  await register(s, 'bob', 'cBob0001234567890abcdef:APA91bBobsPhone');

  await notify(s, app, 'Drink a glass of water');
  await until(() => fcm.sent.length === 2, { what: 'a push to each of alice\'s devices' });
  t.same(fcm.sent.map((m) => m.token).sort(), [PHONE, WATCH].sort(), "alice's two devices, not bob's");
  const outbox = (await s.req('/v1/notifications', { headers: bearer(await s.token('alice')) })).json;
  for (const m of fcm.sent) {
    t.same([m.title, m.body], ['Hydrate says', 'Drink a glass of water']);
    t.same(m.data, { notification_type: 'plugin', navigate_to: `/chat/${app.id}`, app_id: app.id, notification_id: String(outbox[0].id) }, 'data opens the app and names the outbox row');
  }
  t.equal(fcm.exchanges, 1, 'one token exchange');
  t.same(fcm.refused, [], 'the assertion was accepted: signature, audience, issuer and scope');

  await notify(s, app, 'Another glass');
  await until(() => fcm.sent.length === 4, { what: 'the second pushes' });
  t.equal(fcm.exchanges, 1, 'the access token is reused');

  s.clock.advance(3599_000 - 4 * 60_000);
  await notify(s, app, 'Third glass');
  await until(() => fcm.sent.length === 6, { what: 'pushes near the token expiry' });
  t.equal(fcm.exchanges, 2, 'a new access token within five minutes of expiry');

  fcm.revokeAccessTokens();
  const before = fcm.attempts.length;
  await notify(s, app, 'Fourth glass');
  const queue = new Queue(NOTIFICATIONS_QUEUE, { connection: { url: s.env.REDIS_URL }, prefix: s.env.REDIS_PREFIX });
  t.teardown(() => queue.close());
  await until(async () => {
    await promoteDelayed(queue);
    return fcm.sent.length === 8;
  }, { what: 'the pushes refused as unauthenticated, retried', everyMs: 50 });
  t.ok(fcm.attempts.slice(before).some((x) => x.status === 401), 'a send was refused as unauthenticated');
  t.same(fcm.sent.slice(6).map((m) => m.token).sort(), [PHONE, WATCH].sort(), 'and each device got the push once');
  t.equal(fcm.exchanges, 3, 'an access token FCM no longer takes is replaced');
});

t.test('tokens FCM disowns are removed; 429 and 5xx are retried until sent', async (t) => {
  const account = writeServiceAccount();
  const fcm = await startFakeFcm(account);
  t.teardown(() => fcm.close());
  const { s, app } = await setup(t, fcm, account.file);
  for (const token of [PHONE, GONE, BUSY, MALFORMED]) await register(s, 'alice', token);
  fcm.unregistered.add(GONE);
  fcm.failNext(BUSY, [429, 503, 500]);
  const queue = new Queue(NOTIFICATIONS_QUEUE, { connection: { url: s.env.REDIS_URL }, prefix: s.env.REDIS_PREFIX });
  t.teardown(() => queue.close());

  await notify(s, app, 'Stand up and walk');
  const tokens = async (): Promise<string[]> => (await s.service.services.userSettings.tokens('alice')).map((x) => x.token).sort();
  await until(async () => (await tokens()).length === 2, { what: 'the disowned tokens removed' });
  t.same(await tokens(), [BUSY, PHONE].sort(), 'UNREGISTERED and INVALID_ARGUMENT tokens removed; the others kept');

  for (const status of [429, 503, 500]) {
    await until(async () => {
      await promoteDelayed(queue);
      return fcm.attempts.some((x) => x.token === BUSY && x.status === status);
    }, { what: `the ${status} answer`, everyMs: 50 });
  }
  await until(async () => {
    await promoteDelayed(queue);
    return fcm.sent.some((m) => m.token === BUSY);
  }, { what: 'the retried push sent', everyMs: 50 });
  t.same(fcm.attempts.filter((x) => x.token === BUSY).map((x) => x.status), [429, 503, 500, 200], 'retried after each, sent once');
  t.same(fcm.sent.filter((m) => m.body === 'Stand up and walk').map((m) => m.token).sort(), [BUSY, PHONE].sort(), 'each kept device got it once');
  const counts = await waitFor(async () => {
    const c = await queue.getJobCounts('waiting', 'delayed', 'active', 'failed');
    return (c.waiting ?? 0) + (c.delayed ?? 0) + (c.active ?? 0) === 0 ? c : undefined;
  }, { what: 'the queue to empty' });
  t.equal(counts.failed, 0, 'no push job failed');

  // A second notification goes only to the devices still registered.
  await notify(s, app, 'Sit down again');
  const before = fcm.attempts.length;
  await until(() => fcm.sent.filter((m) => m.body === 'Sit down again').length === 2, { what: 'the next pushes' });
  t.same(fcm.attempts.slice(before).map((x) => x.token).sort(), [BUSY, PHONE].sort(), 'the removed tokens are not tried again');
  t.match(await sends(s), { sent: 4, token_removed: 2, retry: 3, refused: 0, error: 0, gone: 0 }, 'push_sends_total counts each outcome');
});

t.test('an assertion signed with another key is refused, and the send fails without retries', async (t) => {
  const account = writeServiceAccount();
  const impostor = writeServiceAccount();
  const fcm = await startFakeFcm(account);
  t.teardown(() => fcm.close());
  const { s, app } = await setup(t, fcm, impostor.file);
  await register(s, 'alice', PHONE);
  const queue = new Queue(NOTIFICATIONS_QUEUE, { connection: { url: s.env.REDIS_URL }, prefix: s.env.REDIS_PREFIX });
  t.teardown(() => queue.close());
  await notify(s, app, 'Signed by the wrong key');
  await until(async () => ((await queue.getJobCounts('failed')).failed ?? 0) === 1, { what: 'the push job to fail' });
  t.match(fcm.refused, [/signature verification failed/], "the fake checked the signature against the account's public key");
  t.same(fcm.sent, [], 'nothing was pushed');
  t.equal((await queue.getJobCounts('delayed')).delayed, 0, 'no retry is waiting');
  const list = (await s.req('/v1/notifications', { headers: bearer(await s.token('alice')) })).json;
  t.equal(list.length, 1, 'the notification is still in the outbox');
  t.match(await sends(s), { refused: 1, sent: 0, retry: 0 }, 'counted as refused');
});

t.test('an API node queues pushes; a jobs node started later sends them', async (t) => {
  const account = writeServiceAccount();
  const fcm = await startFakeFcm(account);
  t.teardown(() => fcm.close());
  const api = await startService(t, { env: { ROLE: 'api', FCM_SERVICE_ACCOUNT_FILE: account.file, FCM_TOKEN_URL: fcm.tokenUrl, FCM_BASE_URL: fcm.url } });
  const created = await api.req('/v1/apps', { method: 'POST', headers: bearer(await api.token('dev')), body: { name: 'Later', capabilities: [], private: false } });
  const app = { id: created.json.id as string, secret: created.json.secret as string };
  await api.req(`/v1/apps/${app.id}/install`, { method: 'POST', headers: bearer(await api.token('alice')) });
  await register(api, 'alice', PHONE);
  await notify(api, app, 'Queued while no jobs node ran');
  const queue = new Queue(NOTIFICATIONS_QUEUE, { connection: { url: api.env.REDIS_URL }, prefix: api.env.REDIS_PREFIX });
  t.teardown(() => queue.close());
  t.equal((await queue.getJobCounts('waiting')).waiting, 1, 'the push waits in Redis');
  await startService(t, { sameDeploymentAs: api, env: { ROLE: 'jobs' } });
  await until(() => fcm.sent.length === 1, { what: 'the jobs node to send it' });
  t.same([fcm.sent[0]!.token, fcm.sent[0]!.body], [PHONE, 'Queued while no jobs node ran']);
});

t.test('without FCM a notification is an outbox row only', async (t) => {
  const s = await startService(t);
  const created = await s.req('/v1/apps', { method: 'POST', headers: bearer(await s.token('alice')), body: { name: 'Solo', capabilities: [] } });
  await s.req(`/v1/apps/${created.json.id}/install`, { method: 'POST', headers: bearer(await s.token('alice')) });
  await register(s, 'alice', PHONE);
  await notify(s, { id: created.json.id, secret: created.json.secret }, 'Only in the outbox');
  const list = (await s.req('/v1/notifications', { headers: bearer(await s.token('alice')) })).json;
  t.same(list.map((n: { body: string }) => n.body), ['Only in the outbox']);
  const queue = new Queue(NOTIFICATIONS_QUEUE, { connection: { url: s.env.REDIS_URL }, prefix: s.env.REDIS_PREFIX });
  t.teardown(() => queue.close());
  const counts = await queue.getJobCounts('waiting', 'delayed', 'active', 'completed', 'failed');
  t.same(Object.values(counts).reduce((a, b) => a + b, 0), 0, 'no push job queued');
});
