// Realtime transcript webhooks of a live session streaming real Opus audio: the segments the device receives reach
// the user's URL (a bare array, `session_id` and `uid` in the query) and an installed app (`{session_id, segments}`),
// signed; a slow endpoint gets later segments coalesced, never two requests at once; a failing one is tried three
// times within the retry window and the batch is then dropped and counted; an app's `message` reply is stored and
// handed on; a session without endpoints reads its settings once and sends nothing, and picks up a URL saved during
// the session at the next refresh.
import t, { type Test } from 'tap';
import { startService, type TestService } from '../../helpers/service.js';
import { STORES } from '../../helpers/stores.js';
import { bearer } from '../../helpers/http.js';
import { advance } from '../../helpers/listen.js';
import { say, streaming } from '../../helpers/live-speech.js';
import { until } from '../../helpers/until.js';
import { gate, startReceiver, type Receiver } from '../../helpers/webhook-receiver.js';
import { RecordingSttEngine } from '../../fakes/recording-stt.js';
import { AppRepliesRepository, type AppReply } from '../../../engine/db/app-replies.js';
import { LIVE_ENDPOINTS_REFRESH_MS } from '../../../engine/webhooks/live.js';
import type { LiveDeliveryReport } from '../../../engine/webhooks/types.js';

const ENV = { WEBHOOK_ALLOW_PRIVATE: 'on' };

async function setUserHook(ts: TestService, uid: string, type: string, url: string): Promise<void> {
  const res = await ts.req(`/v1/users/developer/webhook/${type}`, { method: 'POST', headers: bearer(await ts.token(uid)), body: { url } });
  if (res.status !== 200) throw new Error(`webhook not saved: ${res.status} ${res.text}`);
}

async function userSecret(ts: TestService, uid: string): Promise<string> {
  return (await ts.req('/v1/users/developer/webhook-secret', { headers: bearer(await ts.token(uid)) })).json.secret as string;
}

/** Creates and installs (for its own developer) an app whose webhook fires on `trigger`; answers its id and secret. */
async function installedApp(ts: TestService, uid: string, trigger: string, url: string): Promise<{ id: string; secret: string }> {
  const h = bearer(await ts.token(uid));
  const created = await ts.req('/v1/apps', { method: 'POST', headers: h, body: { name: 'Live notes', description: 'Reads along', capabilities: ['external_integration'], external_integration: { triggers_on: trigger, webhook_url: url } } });
  if (created.status !== 200) throw new Error(`app not created: ${created.status} ${created.text}`);
  const id = created.json.id as string;
  const installed = await ts.req(`/v1/apps/${id}/install`, { method: 'POST', headers: h });
  if (installed.status !== 200) throw new Error(`app not installed: ${installed.status} ${installed.text}`);
  return { id, secret: (await ts.req(`/v1/apps/${id}/webhook-secret`, { headers: h })).json.secret as string };
}

/** A service with the recording engine and a receiver on `uid`'s realtime_transcript URL. */
async function withUserHook(t: Test, uid: string): Promise<{ engine: RecordingSttEngine; ts: TestService; rx: Receiver; drops: LiveDeliveryReport[] }> {
  const engine = new RecordingSttEngine();
  const drops: LiveDeliveryReport[] = [];
  const ts = await startService(t, { env: ENV, sttEngines: [engine], liveDeliveryLog: { dropped: (r) => drops.push(r) } });
  const rx = await startReceiver(t);
  await setUserHook(ts, uid, 'realtime_transcript', rx.url);
  rx.secret = await userSecret(ts, uid);
  return { engine, ts, rx, drops };
}

/** The device's wire segments in the live webhook's shape. */
const asLive = (segs: any[]) => segs.map((s) => ({ text: s.text, speaker: s.speaker, speakerId: s.speaker_id, is_user: s.is_user, start: s.start, end: s.end }));

function metric(text: string, line: string): number {
  const m = new RegExp(`^${line.replace(/[{}"]/g, (ch) => `\\${ch}`)} (\\S+)$`, 'm').exec(text);
  return m ? Number(m[1]) : 0;
}

for (const store of STORES) {
  t.test(`segments reach the user and an app, signed, as the device got them; the app reply is stored and handed on (${store})`, async (t) => {
    const engine = new RecordingSttEngine();
    const seen: AppReply[] = [];
    const ts = await startService(t, { store, env: ENV, sttEngines: [engine], onAppReply: (r) => seen.push(r) });
    const user = await startReceiver(t);
    const app = await startReceiver(t);
    await setUserHook(ts, 'u1', 'realtime_transcript', `${user.url}?k=1`);
    user.secret = await userSecret(ts, 'u1');
    const a = await installedApp(ts, 'u1', 'transcript_processed', app.url);
    app.secret = a.secret;
    app.answer = () => ({ status: 200, body: JSON.stringify({ message: 'Remember to drink some water' }) });

    const { c, actor, stream } = await streaming(ts, engine, 'u1');
    const device = await say(ts, c, stream, 'Hello there.', 'SPEAKER_01', 0.2);
    await until(() => user.received.length === 1 && app.received.length === 1, { what: 'one request at each endpoint' });

    const u = user.received[0]!;
    t.ok(u.verified, 'the user request verifies with the user secret');
    t.equal(u.url.searchParams.get('session_id'), actor.sessionId);
    t.equal(u.url.searchParams.get('uid'), 'u1');
    t.equal(u.url.searchParams.get('k'), '1', 'the URL keeps its own query');
    t.match(u.headers['webhook-id'], /^msg_/);
    t.same(JSON.parse(u.body.toString()), asLive(device), 'a bare array of the segments the device got');
    t.same(Object.keys(JSON.parse(u.body.toString())[0]).sort(), ['end', 'is_user', 'speaker', 'speakerId', 'start', 'text']);

    const p = app.received[0]!;
    t.ok(p.verified, 'the app request verifies with the app secret');
    t.equal(p.url.searchParams.get('uid'), 'u1');
    t.same(JSON.parse(p.body.toString()), { session_id: actor.sessionId, segments: asLive(device) });
    t.not(p.headers['webhook-id'], u.headers['webhook-id'], 'each endpoint its own message id');

    await until(() => seen.length === 1, { what: 'the reply handed to the seam' });
    t.match(seen[0], { appId: a.id, uid: 'u1', sessionId: actor.sessionId, kind: 'message', reply: { message: 'Remember to drink some water' } });
    const stored = await new AppRepliesRepository(ts.service.services.store.knex).list('u1');
    t.same(stored, seen, 'the reply is stored');
    t.equal(user.received.length, 1, 'the user endpoint answered nothing to keep');
    t.equal(metric((await ts.req('/metrics')).text, 'webhook_live_requests_total{event="realtime_transcript",outcome="delivered"}'), 2);
    c.close();
  });
}

t.test('a slow endpoint gets later segments in the next request: none lost, never two at once', async (t) => {
  const { engine, ts, rx } = await withUserHook(t, 'u2');
  const slow = gate();
  rx.answer = async () => {
    await slow.wait;
    return { status: 200 };
  };
  const { c, stream } = await streaming(ts, engine, 'u2');
  const device: any[] = [];
  device.push(...(await say(ts, c, stream, 'First line.', 'SPEAKER_00', 0.1)));
  await until(() => rx.received.length === 1, { what: 'the first request' });
  const speakers = ['SPEAKER_01', 'SPEAKER_00', 'SPEAKER_01'];
  for (let i = 0; i < 3; i++) device.push(...(await say(ts, c, stream, `Line ${i + 2}.`, speakers[i]!, 1.5 + i * 1.5)));
  slow.open();
  await until(() => rx.received.reduce((n, r) => n + JSON.parse(r.body.toString()).length, 0) >= device.length, { what: 'every segment at the endpoint' });
  t.equal(rx.received.length, 2, 'three steps while the first request waited went in one request');
  t.equal(rx.maxOpen, 1, 'never two requests at once');
  t.same(rx.received.flatMap((r) => JSON.parse(r.body.toString())), asLive(device), 'every segment, in order');
  t.ok(rx.received.every((r) => r.verified));
  c.close();
});

t.test('a failing endpoint is tried three times with one message id, then the batch is dropped and counted; 410 drops at once', async (t) => {
  const { engine, ts, rx, drops } = await withUserHook(t, 'u3');
  rx.answer = () => ({ status: 503 });
  const { c, stream } = await streaming(ts, engine, 'u3');
  await say(ts, c, stream, 'Is anyone there?', 'SPEAKER_00', 0.1);
  await until(() => rx.received.length === 1, { what: 'the first attempt' });
  // The waits between attempts run on the injected clock.
  await until(
    async () => {
      await advance(ts, 500);
      return rx.received.length === 3;
    },
    { what: 'the third attempt' },
  );
  await until(async () => metric((await ts.req('/metrics')).text, 'webhook_live_dropped_total{event="realtime_transcript",reason="retries_spent"}') === 1, { what: 'the drop counted' });
  t.equal(new Set(rx.received.map((r) => r.headers['webhook-id'])).size, 1, 'the same webhook-id on every attempt');
  t.ok(rx.received.every((r) => r.verified), 'every attempt signed');
  t.equal(rx.received.length, 3, 'given up after the third attempt');
  t.match(drops, [{ webhookId: rx.received[0]!.headers['webhook-id'], uid: 'u3', eventType: 'realtime_transcript', endpoint: { ownerKind: 'user', ownerId: 'u3' }, attempts: 3, last: { outcome: 'retry', status: 503 }, bodyBytes: rx.received[0]!.body.length }], 'reported to the delivery log');

  rx.answer = () => ({ status: 410 });
  await say(ts, c, stream, 'Hello again.', 'SPEAKER_01', 2);
  await until(async () => metric((await ts.req('/metrics')).text, 'webhook_live_dropped_total{event="realtime_transcript",reason="gone"}') === 1, { what: 'the gone batch counted' });
  t.equal(rx.received.length, 4, 'a 410 is not tried again');
  t.match(drops[1], { attempts: 1, last: { outcome: 'gone', status: 410 } });
  c.close();
});

t.test('a session without endpoints reads its settings once and sends nothing; a URL saved meanwhile applies at the refresh', async (t) => {
  const engine = new RecordingSttEngine();
  const ts = await startService(t, { env: ENV, sttEngines: [engine] });
  const rx = await startReceiver(t);
  rx.secret = await userSecret(ts, 'u4');
  const reads: string[] = [];
  ts.service.services.store.knex.on('query', (q: { sql: string }) => {
    if (/developer_webhooks|app_installs|webhook_secrets/.test(q.sql)) reads.push(q.sql);
  });
  const { c, actor, stream } = await streaming(ts, engine, 'u4');
  await say(ts, c, stream, 'Nobody listens.', 'SPEAKER_00', 0.1);
  t.equal(reads.length, 1, 'one settings lookup (one statement) at the start');
  t.equal(actor.liveWebhooks?.wantsPcm, false);
  t.equal(actor.liveWebhooks?.pcmSamples, 0, 'no PCM handed to the webhooks');

  await setUserHook(ts, 'u4', 'realtime_transcript', rx.url);
  reads.length = 0;
  await advance(ts, LIVE_ENDPOINTS_REFRESH_MS);
  await until(() => reads.length >= 2, { what: 'the refresh read the settings and the secret' });
  const device = await say(ts, c, stream, 'Now somebody does.', 'SPEAKER_01', 2);
  await until(() => rx.received.length === 1, { what: 'a request after the refresh' });
  t.same(JSON.parse(rx.received[0]!.body.toString()), asLive(device));
  t.ok(rx.received[0]!.verified);
  c.close();
});
