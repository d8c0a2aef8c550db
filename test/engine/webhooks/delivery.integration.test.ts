// Durable conversation-created deliveries against real receivers that verify with the Standard Webhooks package: the
// body as SPEC lists it, retries on the schedule with the same webhook-id and bytes, Retry-After, 410 and other 4xx,
// timeouts and resets, rotation, a destination refused at send time, reprocess, the failure run that disables an
// endpoint, the circuit, and the delivery log's routes.
import t, { type Test } from 'tap';
import type { Job } from 'bullmq';
import { startService, type TestService } from '../../helpers/service.js';
import { bearer } from '../../helpers/http.js';
import { until, waitFor } from '../../helpers/until.js';
import { endedConversation, installedApp, receiver, secretOf, setUserHook, verified, LINES, type Receiver } from '../../helpers/webhooks.js';
import { webhookParts } from '../../../engine/webhooks/parts.js';
import { CIRCUIT_FAILURES, CIRCUIT_OPEN_MS, DISABLE_AFTER_MS, RETRY_DELAYS_MS, RETRY_JITTER, retryDelayMs } from '../../../engine/webhooks/worker.js';
import type { DeliveryRecord } from '../../../engine/db/deliveries.js';
import { STORES, type StoreKind } from '../../helpers/stores.js';

const PRIVATE_OK = { WEBHOOK_ALLOW_PRIVATE: 'on' };

const deliveries = (s: TestService, kind: 'user' | 'app', id: string): Promise<DeliveryRecord[]> => webhookParts(s.service.services).deliveries.listForOwner(kind, id, 100, 0);

/** The owner's only delivery once `done` holds for it. */
const settled = (s: TestService, kind: 'user' | 'app', id: string, done: (d: DeliveryRecord) => boolean, what: string): Promise<DeliveryRecord> =>
  waitFor(async () => (await deliveries(s, kind, id)).find(done), { what, timeoutMs: 15_000 });

/** The delivery's job once it waits for its retry. */
const delayedJob = (s: TestService, id: string): Promise<Job> =>
  waitFor(async () => {
    const job = await s.service.services.webhookQueue.queue.getJob(id);
    return job && (await job.getState()) === 'delayed' ? job : undefined;
  }, { what: 'the retry waiting', timeoutMs: 15_000 });

async function userHooked(t: Test, answer?: Receiver['answer'], env: Record<string, string> = {}, tuning = {}, store: StoreKind = 'sqlite'): Promise<{ s: TestService; rx: Receiver }> {
  const s = await startService(t, { env: { ...PRIVATE_OK, ...env }, tuning, store });
  const rx = await receiver(t, answer);
  await setUserHook(s, 'u1', rx.url);
  return { s, rx };
}

t.test('the retry schedule: immediately, then 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h, each up to 10% longer', async (t) => {
  t.same(RETRY_DELAYS_MS, [5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 36_000_000]);
  t.same([1, 2, 3, 4, 5, 6, 7].map((n) => retryDelayMs(n, null, () => 0)), RETRY_DELAYS_MS);
  t.equal(retryDelayMs(1, null, () => 1), Math.round(5_000 * (1 + RETRY_JITTER)));
  t.equal(retryDelayMs(8, null, () => 0), undefined, 'eight attempts in all');
  t.equal(retryDelayMs(1, 120_000, () => 0), 120_000, 'a longer Retry-After wins');
});

t.test('200 at once: the body exactly as SPEC, uid in the query, signed, recorded delivered', async (t) => {
  const { s, rx } = await userHooked(t);
  const id = await endedConversation(s, 'u1');
  const d = await settled(s, 'user', 'u1', (x) => x.state === 'delivered', 'delivered');
  t.equal(rx.received.length, 1);
  const got = rx.received[0]!;
  t.equal(got.query.get('uid'), 'u1');
  t.equal(got.headers['webhook-id'], d.id);
  t.match(d.id, /^msg_[0-9a-f]{32}$/);
  const body = verified(got, await secretOf(s, 'user', 'u1'));
  t.same(Object.keys(body).sort(), ['apps_response', 'created_at', 'discarded', 'finished_at', 'folder_id', 'folder_name', 'id', 'started_at', 'structured', 'transcript_segments'].sort(), 'exactly the SPEC fields');
  t.equal(body.id, id);
  for (const k of ['created_at', 'started_at', 'finished_at']) t.ok(!Number.isNaN(Date.parse(body[k])) && /T/.test(body[k]), `${k} is an ISO date-time`);
  t.same(body.transcript_segments, LINES.map((l) => ({ text: l.text, speaker: l.speaker, speakerId: l.speakerId, speaker_name: l.isUser ? 'User' : `Speaker ${l.speakerId}`, is_user: l.isUser, start: l.start, end: l.end })));
  t.same(Object.keys(body.structured).sort(), ['action_items', 'category', 'emoji', 'events', 'overview', 'title']);
  for (const k of ['title', 'overview', 'emoji', 'category']) t.type(body.structured[k], 'string', `structured.${k}`);
  t.ok(Array.isArray(body.structured.events));
  for (const a of body.structured.action_items) t.same(Object.keys(a).sort(), ['completed', 'description']);
  t.same(body.apps_response, []);
  t.type(body.discarded, 'boolean');
  t.equal(body.folder_id, null);
  t.equal(body.folder_name, null);
  t.match(d, { state: 'delivered', attempts: 1, lastStatus: 200, lastError: null, nextAttemptAt: null, bodyBytes: got.body.length, reprocess: false });
  t.type(d.deliveredAt, 'string');
});

t.test('500 then 200: the retry waits 5 s by the clock, and carries the same webhook-id and bytes', async (t) => {
  const { s, rx } = await userHooked(t, (_q, res, n) => res.writeHead(n === 1 ? 500 : 200).end());
  await endedConversation(s, 'u1');
  const first = await settled(s, 'user', 'u1', (x) => x.state === 'retrying', 'the retry scheduled');
  t.match(first, { attempts: 1, lastStatus: 500 });
  const wait = Date.parse(first.nextAttemptAt!) - Date.parse(first.updatedAt);
  t.ok(wait >= 5_000 && wait <= 5_500, `next attempt in ${wait} ms`);
  s.clock.advance(wait);
  await (await delayedJob(s, first.id)).promote();
  const done = await settled(s, 'user', 'u1', (x) => x.state === 'delivered', 'delivered');
  t.match(done, { attempts: 2, lastStatus: 200 });
  t.equal(rx.received.length, 2);
  const [a, b] = rx.received as [typeof rx.received[0], typeof rx.received[0]];
  t.equal(a.headers['webhook-id'], b.headers['webhook-id'], 'same webhook-id');
  t.same(a.body, b.body, 'same body bytes');
  t.not(a.headers['webhook-timestamp'], b.headers['webhook-timestamp'], 'signed anew at each attempt');
  const secret = await secretOf(s, 'user', 'u1');
  for (const r of rx.received) verified(r, secret);
});

t.test('429 with Retry-After: the next attempt waits what the receiver asked', async (t) => {
  const { s } = await userHooked(t, (_q, res) => res.writeHead(429, { 'retry-after': '120' }).end());
  await endedConversation(s, 'u1');
  const d = await settled(s, 'user', 'u1', (x) => x.state === 'retrying', 'the retry scheduled');
  t.equal(Date.parse(d.nextAttemptAt!) - Date.parse(d.updatedAt), 120_000);
  t.equal(d.lastStatus, 429);
});

t.test('410 disables the endpoint and tells its owner; another 4xx fails without a retry', async (t) => {
  const { s, rx } = await userHooked(t, (_q, res) => res.writeHead(410).end());
  await endedConversation(s, 'u1');
  const d = await settled(s, 'user', 'u1', (x) => x.state === 'failed', 'failed');
  t.match(d, { attempts: 1, lastStatus: 410, nextAttemptAt: null });
  const token = await s.token('u1');
  const setting = await waitFor(async () => {
    const res = await s.req('/v1/users/developer/webhook/memory_created', { headers: bearer(token) });
    return res.json.enabled === false ? res.json : undefined;
  }, { what: 'the endpoint disabled' });
  t.same(setting, { url: rx.url, enabled: false }, 'disabled, URL kept');
  const notes = await waitFor(async () => {
    const n = await webhookParts(s.service.services).deliveries.unsentNotifications('u1');
    return n.length > 0 ? n : undefined;
  }, { what: 'the note' });
  t.match(notes, [{ kind: 'webhook_disabled', appId: null, detail: { event_type: 'memory_created', reason: 'gone' } }]);
  const outbox = await s.req('/v1/notifications', { headers: bearer(token) });
  t.match(outbox.json, [{ title: 'Webhook disabled: memory_created', body: /answered 410 Gone/ }], 'the owner is notified');

  await setUserHook(s, 'u2', rx.url);
  rx.answer = (_q, res) => res.writeHead(400).end();
  await endedConversation(s, 'u2');
  const bad = await settled(s, 'user', 'u2', (x) => x.state === 'failed', 'failed');
  t.match(bad, { attempts: 1, lastStatus: 400, nextAttemptAt: null }, 'no retry scheduled');
  await until(async () => (await s.service.services.webhookQueue.queue.getJob(bad.id)) === undefined, { what: 'the job done, none left to retry' });
  t.equal((await s.req('/v1/users/developer/webhook/memory_created', { headers: bearer(await s.token('u2')) })).json.enabled, true, 'a 400 alone does not disable');
  const metrics = await waitFor(async () => {
    const text = (await s.req('/metrics')).text;
    return /^webhook_deliveries_failed_total\{event="memory_created"\} 2$/m.test(text) ? text : undefined;
  }, { what: 'both deliveries counted as given up' });
  t.match(metrics, /^webhook_deliveries_total\{event="memory_created",outcome="gone"\} 1$/m, 'the attempts by outcome');
  t.match(metrics, /^webhook_deliveries_total\{event="memory_created",outcome="rejected"\} 1$/m);
});

t.test('a slow receiver times out, a reset connection is a connection error: both retried', async (t) => {
  const { s, rx } = await userHooked(t, () => undefined, {}, { webhookTimeoutMs: 300 });
  await endedConversation(s, 'u1');
  const slow = await settled(s, 'user', 'u1', (x) => x.state === 'retrying', 'the retry scheduled');
  t.match(slow, { attempts: 1, lastStatus: null, lastError: 'timeout' });
  t.equal(rx.received.length, 1);

  await setUserHook(s, 'u2', rx.url);
  rx.answer = (req) => req.socket.destroy();
  await endedConversation(s, 'u2');
  const reset = await settled(s, 'user', 'u2', (x) => x.state === 'retrying', 'the retry scheduled');
  t.match(reset, { attempts: 1, lastStatus: null, lastError: 'connection' });
});

t.test('after a rotation both secrets sign, and each verifies', async (t) => {
  const { s, rx } = await userHooked(t);
  const old = await secretOf(s, 'user', 'u1');
  const rotated = await s.req('/v1/users/developer/webhook-secret/rotate', { method: 'POST', headers: bearer(await s.token('u1')) });
  const fresh = rotated.json.secret as string;
  await endedConversation(s, 'u1');
  await settled(s, 'user', 'u1', (x) => x.state === 'delivered', 'delivered');
  const got = rx.received[0]!;
  t.equal(String(got.headers['webhook-signature']).split(' ').length, 2);
  for (const secret of [fresh, old]) t.equal(verified(got, secret).id, JSON.parse(got.body.toString()).id);
});

t.test('a URL whose name now resolves to a metadata address is refused at send time and recorded', async (t) => {
  const s = await startService(t, { env: PRIVATE_OK, webhookResolver: async (host) => (host === 'hooks.example.org' ? [{ address: '169.254.169.254', family: 4 }] : []) });
  // Saved while it resolved elsewhere: written as the route would have stored it.
  await webhookParts(s.service.services).webhooks.set('u1', 'memory_created', 'http://hooks.example.org/hook', null, s.clock.now());
  await endedConversation(s, 'u1');
  const d = await settled(s, 'user', 'u1', (x) => x.state === 'failed', 'failed');
  t.match(d, { attempts: 1, lastStatus: null, lastError: 'refused:metadata', nextAttemptAt: null });
});

t.test('reprocess: the user gets it again flagged, under a new id; the app only once', async (t) => {
  const { s, rx } = await userHooked(t);
  const app = await receiver(t);
  const appId = await installedApp(s, 'dev', 'u1', app.url);
  const id = await endedConversation(s, 'u1');
  await settled(s, 'user', 'u1', (x) => x.state === 'delivered', 'user delivered');
  await settled(s, 'app', appId, (x) => x.state === 'delivered', 'app delivered');
  const appBody = verified(app.received[0]!, await secretOf(s, 'app', appId));
  t.equal(appBody.id, id, "the app's body is the same conversation");
  t.equal(app.received[0]!.query.get('uid'), 'u1');

  await until(async () => (await s.service.services.conversations.getById(id))?.firstProcessedAt !== null, { what: 'the first completion announced' });
  const res = await s.req(`/v1/conversations/${id}/reprocess`, { method: 'POST', headers: bearer(await s.token('u1')) });
  t.ok(res.status < 300, `reprocess accepted (${res.status})`);
  await until(async () => (await deliveries(s, 'user', 'u1')).filter((x) => x.state === 'delivered').length === 2, { what: 'second user delivery', timeoutMs: 15_000 });
  const again = verified(rx.received[1]!, await secretOf(s, 'user', 'u1'));
  t.equal(again.reprocess, true, 'the body says it is a reprocess');
  t.equal(again.id, id);
  t.not(rx.received[1]!.headers['webhook-id'], rx.received[0]!.headers['webhook-id'], 'a new event, a new webhook-id');
  t.equal(verified(rx.received[0]!, await secretOf(s, 'user', 'u1')).reprocess, undefined, 'the first has no flag');
  t.equal((await deliveries(s, 'app', appId)).length, 1, 'no second app delivery was recorded');
  t.ok((await deliveries(s, 'user', 'u1')).find((x) => x.reprocess), 'the log marks it');
});

t.test('a failure run of five days disables the endpoint and records a note for its owner', async (t) => {
  const { s } = await userHooked(t, (_q, res) => res.writeHead(400).end());
  await endedConversation(s, 'u1');
  await settled(s, 'user', 'u1', (x) => x.state === 'failed', 'first failure');
  s.clock.advance(DISABLE_AFTER_MS);
  await endedConversation(s, 'u1');
  await until(async () => (await deliveries(s, 'user', 'u1')).filter((x) => x.state === 'failed').length === 2, { what: 'second failure' });
  const token = await s.token('u1');
  await until(async () => (await s.req('/v1/users/developer/webhook/memory_created', { headers: bearer(token) })).json.enabled === false, { what: 'the endpoint disabled' });
  const notes = await waitFor(async () => {
    const n = await webhookParts(s.service.services).deliveries.unsentNotifications('u1');
    return n.length > 0 ? n : undefined;
  }, { what: 'the note' });
  t.match(notes, [{ kind: 'webhook_disabled', detail: { reason: 'failing' } }]);
});

for (const store of STORES) t.test(`${store}: the circuit: after five failures in a row an endpoint is left alone until one probe goes through`, async (t) => {
  const { s, rx } = await userHooked(t, (_q, res) => res.writeHead(400).end(), {}, {}, store);
  for (let i = 0; i < CIRCUIT_FAILURES; i++) {
    await endedConversation(s, 'u1');
    await until(async () => (await deliveries(s, 'user', 'u1')).filter((x) => x.state === 'failed').length === i + 1, { what: `failure ${i + 1}` });
  }
  const opened = s.clock.now();
  rx.answer = (_q, res) => res.writeHead(200).end();
  await endedConversation(s, 'u1');
  const held = await settled(s, 'user', 'u1', (x) => x.state === 'pending' && x.nextAttemptAt !== null, 'held by the circuit');
  t.equal(held.attempts, 0, 'held without an attempt');
  const wait = Date.parse(held.nextAttemptAt!) - opened;
  t.ok(wait >= CIRCUIT_OPEN_MS && wait <= CIRCUIT_OPEN_MS * 1.1, `waits for the circuit (${wait} ms)`);
  t.equal(rx.received.length, CIRCUIT_FAILURES, 'the receiver saw only the five');
  s.clock.advance(wait);
  await (await delayedJob(s, held.id)).promote();
  const probe = await settled(s, 'user', 'u1', (x) => x.id === held.id && x.state === 'delivered', 'the probe delivered');
  t.equal(probe.attempts, 1);
  t.match(await webhookParts(s.service.services).deliveries.health({ ownerKind: 'user', ownerId: 'u1', eventType: 'memory_created' }), { consecutiveFailures: 0, circuitOpenUntil: null }, 'closed again');
});

t.test('the delivery log and redelivery, for a user and for an app owner', async (t) => {
  const { s, rx } = await userHooked(t, (_q, res) => res.writeHead(400).end(), {}, {});
  const app = await receiver(t);
  const appId = await installedApp(s, 'dev', 'u1', app.url);
  await endedConversation(s, 'u1');
  const failed = await settled(s, 'user', 'u1', (x) => x.state === 'failed', 'failed');
  await settled(s, 'app', appId, (x) => x.state === 'delivered', 'app delivered');
  const [u1, u2, dev] = [await s.token('u1'), await s.token('u2'), await s.token('dev')];

  const list = await s.req('/v1/users/developer/webhooks/deliveries?limit=10', { headers: bearer(u1) });
  t.equal(list.status, 200);
  t.equal(list.headers['x-has-more'], 'false');
  t.match(list.json, [{ id: failed.id, event_type: 'memory_created', state: 'failed', attempts: 1, last_status_code: 400, last_error: null, latency_ms: Number, next_attempt_at: null, created_at: String, updated_at: String }]);
  t.same((await s.req('/v1/users/developer/webhooks/deliveries', { headers: bearer(u2) })).json, [], "another user's log is empty");

  t.equal((await s.req(`/v1/users/developer/webhooks/deliveries/${failed.id}/redeliver`, { method: 'POST', headers: bearer(u2) })).status, 404, "another user's delivery is not found");
  rx.answer = (_q, res) => res.writeHead(200).end();
  const again = await s.req(`/v1/users/developer/webhooks/deliveries/${failed.id}/redeliver`, { method: 'POST', headers: bearer(u1) });
  t.equal(again.status, 200);
  t.equal(again.json.id, failed.id);
  const done = await settled(s, 'user', 'u1', (x) => x.state === 'delivered', 'redelivered');
  t.equal(done.attempts, 2);
  t.equal(rx.received[1]!.headers['webhook-id'], failed.id, 'the same webhook-id');

  const appLog = await s.req(`/v1/apps/${appId}/webhooks/deliveries`, { headers: bearer(dev) });
  t.equal(appLog.status, 200);
  t.match(appLog.json, [{ event_type: 'memory_created', state: 'delivered', last_status_code: 200 }], "the app's owner sees the app's deliveries");
  t.equal((await s.req(`/v1/apps/${appId}/webhooks/deliveries`, { headers: bearer(u1) })).status, 404, 'nobody else');
  t.equal((await s.req(`/v1/apps/${appId}/webhooks/deliveries/${failed.id}/redeliver`, { method: 'POST', headers: bearer(dev) })).status, 404, "a user's delivery is not the app's");

  app.answer = (_q, res) => res.writeHead(500).end();
  const appDelivery = appLog.json[0].id as string;
  t.equal((await s.req(`/v1/apps/${appId}/webhooks/deliveries/${appDelivery}/redeliver`, { method: 'POST', headers: bearer(dev) })).status, 200);
  await settled(s, 'app', appId, (x) => x.state === 'retrying', 'retrying');
  const busy = await s.req(`/v1/apps/${appId}/webhooks/deliveries/${appDelivery}/redeliver`, { method: 'POST', headers: bearer(dev) });
  t.equal(busy.status, 409, 'not while it is under way');
  t.match(busy.json, { detail: /under way/ });
});

t.test('a live batch given up on is logged as dropped, without its body, and cannot be sent again', async (t) => {
  const s = await startService(t, { store: 'pg' });
  const log = webhookParts(s.service.services).deliveries;
  log.dropped({
    webhookId: 'msg_live1', uid: 'u1', eventType: 'realtime_transcript', endpoint: { ownerKind: 'user', ownerId: 'u1', url: 'https://93.184.215.14/rt' },
    attempts: 3, sessionId: 'sess-1', bodyBytes: 812,
    last: { outcome: 'retry', status: 503, latencyMs: 12, error: null, retryAfterMs: null, reply: Buffer.alloc(0) },
  });
  const u1 = await s.token('u1');
  const list = await waitFor(async () => {
    const r = await s.req('/v1/users/developer/webhooks/deliveries', { headers: bearer(u1) });
    return r.json.length > 0 ? r.json : undefined;
  }, { what: 'the dropped row' });
  t.match(list, [{ id: 'msg_live1', event_type: 'realtime_transcript', subject_id: 'sess-1', state: 'dropped', attempts: 3, last_status_code: 503, body_bytes: 812 }]);
  const again = await s.req('/v1/users/developer/webhooks/deliveries/msg_live1/redeliver', { method: 'POST', headers: bearer(u1) });
  t.equal(again.status, 409);
  t.match(again.json, { detail: /realtime_transcript/ });
});

t.test("a disabled endpoint's deliveries under way end cancelled", async (t) => {
  const { s, rx } = await userHooked(t, (_q, res, n) => res.writeHead(n === 1 ? 500 : 410).end());
  await endedConversation(s, 'u1');
  const waiting = await settled(s, 'user', 'u1', (x) => x.state === 'retrying', 'the first waits for its retry');
  await endedConversation(s, 'u1');
  await settled(s, 'user', 'u1', (x) => x.id !== waiting.id && x.state === 'failed', 'the second answered 410');
  const cancelled = await settled(s, 'user', 'u1', (x) => x.id === waiting.id && x.state === 'cancelled', 'the first cancelled');
  t.equal(cancelled.attempts, 1);
  await (await delayedJob(s, waiting.id)).promote();
  await until(async () => (await s.service.services.webhookQueue.queue.getJob(waiting.id)) === undefined, { what: 'its job done' });
  t.equal(rx.received.length, 2, 'its retry was not sent');
  t.equal((await webhookParts(s.service.services).deliveries.get(waiting.id))?.state, 'cancelled');
});

t.test('a first completion announced twice (after a crash) is delivered once', async (t) => {
  const { s, rx } = await userHooked(t);
  const id = await endedConversation(s, 'u1');
  const d = await settled(s, 'user', 'u1', (x) => x.state === 'delivered', 'delivered');
  const again = await s.service.services.webhookQueue.enqueueConversationCreated('u1', id, { reprocess: false, discarded: false });
  t.same(again.map((x) => x.id), [d.id], 'the same webhook id');
  await until(async () => (await s.service.services.webhookQueue.queue.getJob(d.id)) === undefined, { what: 'the second job done' });
  t.equal(rx.received.length, 1, 'sent once');
  t.equal((await deliveries(s, 'user', 'u1')).length, 1, 'one row');
});

for (const store of STORES) t.test(`${store}: each attempt goes where its endpoint points then: a changed URL takes the retry, an uninstalled app's is cancelled`, async (t) => {
  const { s, rx } = await userHooked(t, (_q, res) => res.writeHead(503).end(), {}, {}, store);
  const app = await receiver(t, (_q, res) => res.writeHead(503).end());
  const appId = await installedApp(s, 'dev', 'u1', app.url);
  await endedConversation(s, 'u1');
  const first = await settled(s, 'user', 'u1', (x) => x.state === 'retrying', 'the user retry scheduled');
  const appFirst = await settled(s, 'app', appId, (x) => x.state === 'retrying', 'the app retry scheduled');
  const moved = await receiver(t);
  await setUserHook(s, 'u1', moved.url);
  const gone = await s.req(`/v1/apps/${appId}/install`, { method: 'DELETE', headers: bearer(await s.token('u1')) });
  t.equal(gone.status, 204);
  s.clock.advance(RETRY_DELAYS_MS[0] * (1 + RETRY_JITTER));
  await (await delayedJob(s, first.id)).promote();
  await (await delayedJob(s, appFirst.id)).promote();
  t.match(await settled(s, 'user', 'u1', (x) => x.state === 'delivered', 'delivered to the new URL'), { attempts: 2, lastStatus: 200 });
  t.match(await settled(s, 'app', appId, (x) => x.state === 'cancelled', 'the app delivery cancelled'), { attempts: 1 });
  t.equal(rx.received.length, 1, 'the old URL had the first attempt only');
  t.equal(app.received.length, 1, 'the uninstalled app had the first attempt only');
  t.equal(moved.received.length, 1);
  const got = moved.received[0]!;
  t.equal(got.headers['webhook-id'], first.id, 'the same webhook-id');
  t.same(got.body, rx.received[0]!.body, 'the same bytes');
  verified(got, await secretOf(s, 'user', 'u1'));
});
