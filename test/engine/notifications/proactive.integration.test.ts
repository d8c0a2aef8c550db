// Proactive notifications from a live session streaming real Opus audio: an installed app's realtime webhook answers
// with a prompt; its variables are filled only for scopes asked for, declared and granted; the LLM (a local fake of
// the OpenAI API) or, offline, the filled prompt itself becomes the notification, in the user's outbox and stream.
// One per user per app per 30 s of the service's clock on every node, text under 5 characters dropped, a failing
// model sending nothing, an over-long prompt refused with a notice to the app's owner, and a plain reply `message`
// pushed as it is, to the outbox and through a local fake of FCM.
import t from 'tap';
import { startService, type TestService } from '../../helpers/service.js';
import { STORES } from '../../helpers/stores.js';
import { bearer } from '../../helpers/http.js';
import { advance } from '../../helpers/listen.js';
import { say, streaming } from '../../helpers/live-speech.js';
import { until, waitFor } from '../../helpers/until.js';
import { startReceiver, type Answer, type Receiver } from '../../helpers/webhook-receiver.js';
import { direct, openStream } from '../../helpers/notifications.js';
import { RecordingSttEngine } from '../../fakes/recording-stt.js';
import { startFakeOpenAI } from '../../fakes/openai-server.js';
import { startFakeFcm, writeServiceAccount } from '../../fakes/fcm-server.js';
import { ConversationStatus } from '../../../engine/protocol.js';
import { MAX_PROMPT_CHARS, PROACTIVE_INTERVAL_MS } from '../../../engine/notifications/proactive.js';

const ENV = { WEBHOOK_ALLOW_PRIVATE: 'on' };
const ALL = ['user_name', 'user_facts', 'user_context', 'user_chat'];

/** A public app of `owner` reading live transcripts with proactive `scopes`, installed by `uid`. */
async function proactiveApp(ts: TestService, owner: string, uid: string, url: string, scopes: string[], name = 'Dental Buddy'): Promise<{ id: string; secret: string; webhookSecret: string }> {
  const created = await ts.req('/v1/apps', {
    method: 'POST',
    headers: bearer(await ts.token(owner)),
    body: { name, description: 'Nudges', private: false, capabilities: ['external_integration', 'proactive_notification'], external_integration: { triggers_on: 'transcript_processed', webhook_url: url }, proactive_notification: { scopes } },
  });
  if (created.status !== 200) throw new Error(`app not created: ${created.status} ${created.text}`);
  const id = created.json.id as string;
  const installed = await ts.req(`/v1/apps/${id}/install`, { method: 'POST', headers: bearer(await ts.token(uid)) });
  if (installed.status !== 200) throw new Error(`app not installed: ${installed.status} ${installed.text}`);
  const webhookSecret = (await ts.req(`/v1/apps/${id}/webhook-secret`, { headers: bearer(await ts.token(owner)) })).json.secret as string;
  return { id, secret: created.json.secret as string, webhookSecret };
}

async function setName(ts: TestService, uid: string, name: string): Promise<void> {
  const res = await ts.req('/v1/users/settings', { method: 'PATCH', headers: bearer(await ts.token(uid)), body: { name } });
  if (res.status !== 200) throw new Error(`settings not saved: ${res.status} ${res.text}`);
}

async function remember(ts: TestService, uid: string, content: string): Promise<void> {
  await ts.service.services.users.ensure(uid, ts.clock.now(), true);
  await ts.service.services.memories.create(uid, { content, category: 'core', visibility: 'public', tags: [] }, ts.clock.now());
}

/** A finished, processed conversation of `uid` with this title and overview. */
async function pastConversation(ts: TestService, uid: string, title: string, overview: string): Promise<void> {
  const { conversations, users } = ts.service.services;
  const now = ts.clock.now();
  await users.ensure(uid, now, true);
  const c = await conversations.create({ userId: uid, status: ConversationStatus.COMPLETED, startedAt: new Date(now - 86_400_000).toISOString(), finishedAt: new Date(now - 86_000_000).toISOString(), source: 'omi', language: 'en', segments: [{ text: overview, start: 0, end: 3 }], now });
  await conversations.saveResult(c.id, { structured: { title, overview, emoji: '🦷', category: 'health', actionItems: [], events: [] }, memories: [], discarded: false, producedBy: 'builtin' }, now);
}

async function outbox(ts: TestService, uid: string): Promise<any[]> {
  return (await ts.req('/v1/notifications', { headers: bearer(await ts.token(uid)) })).json as any[];
}

/** The recorded outcomes of `uid`'s replies, oldest first. */
async function outcomes(ts: TestService, uid: string): Promise<{ app_id: string | null; trigger: string; outcome: string; notification_id: number | null }[]> {
  const rows = await ts.service.services.store.knex('proactive_notifications').where({ uid }).orderBy('id').select('app_id', 'trigger', 'outcome', 'notification_id');
  return rows.map((r: any) => ({ ...r, notification_id: r.notification_id === null ? null : Number(r.notification_id) }));
}

const untilOutcomes = (ts: TestService, uid: string, n: number) => waitFor(async () => { const o = await outcomes(ts, uid); return o.length >= n ? o : undefined; }, { what: `${n} recorded outcomes` });

/** Answers each request with the next reply of `replies` (then `{}`). */
function replies(rx: Receiver, ...bodies: unknown[]): void {
  let i = 0;
  rx.answer = (): Answer => ({ status: 200, body: JSON.stringify(bodies[i++] ?? {}) });
}

for (const store of STORES) {
  t.test(`with an LLM, a prompt using every variable is filled from what the user granted and the answer is pushed (${store})`, async (t) => {
    const fake = await startFakeOpenAI();
    t.teardown(() => fake.close());
    const engine = new RecordingSttEngine();
    const ts = await startService(t, { store, env: { ...ENV, LLM_BASE_URL: fake.baseUrl, LLM_MAX_RETRIES: '0' }, sttEngines: [engine] });
    const rx = await startReceiver(t);
    const app = await proactiveApp(ts, 'dev1', 'u1', rx.url, ALL);
    rx.secret = app.webhookSecret;
    await setName(ts, 'u1', 'Ana');
    await remember(ts, 'u1', 'Ana is allergic to penicillin');
    await pastConversation(ts, 'u1', 'Garden Plans', 'Planting tomatoes in spring.');
    await pastConversation(ts, 'u1', 'Dentist Appointment', 'Booked a dentist check-up for Tuesday.');
    t.equal((await direct(ts, app.id, { uid: 'u1', message: 'Your weekly report is ready' }, bearer(app.secret))).status, 200);
    const sse = await openStream(ts, await ts.token('u1'));
    t.teardown(() => sse.close());

    const prompt = 'Name: {{user_name}}\nFacts:\n{{user_facts}}\nContext:\n{{ user_context }}\nChat:\n{{user_chat}}';
    replies(rx, { session_id: 'x', notification: { prompt, params: ALL } });
    fake.script({ kind: 'answer', content: { notification: '  Ana, call the dentist before Tuesday.  ' } });
    const { c, actor, stream } = await streaming(ts, engine, 'u1');
    await say(ts, c, stream, 'I need to call the dentist tomorrow.', 'SPEAKER_00', 0.2);
    const [rec] = await untilOutcomes(ts, 'u1', 1);
    t.ok(rx.received[0]!.verified, 'the app got a signed request');
    t.same(JSON.parse(rx.received[0]!.body.toString()).session_id, actor.sessionId);

    t.equal(fake.requests.length, 1, 'one LLM request');
    const sent = fake.requests[0]!.body;
    t.equal(sent.response_format.json_schema.name, 'proactive_notification');
    t.equal(
      sent.messages[1].content,
      'Name: Ana\nFacts:\n- Ana is allergic to penicillin\nContext:\n- Dentist Appointment: Booked a dentist check-up for Tuesday.\nChat:\nDental Buddy says: Your weekly report is ready',
      'every variable filled: the name, the memories, the conversation that shares the live words (not the other), the app messages',
    );
    const [n] = await outbox(ts, 'u1');
    t.match(n, { title: 'Dental Buddy', body: 'Ana, call the dentist before Tuesday.', source: 'proactive', app_id: app.id, data: { notification_type: 'plugin', navigate_to: `/chat/${app.id}`, app_id: app.id } });
    t.same(rec, { app_id: app.id, trigger: 'notification', outcome: 'sent', notification_id: n.id });
    await until(() => sse.events.some((e) => e.data.id === n.id), { what: 'the notification on the stream' });

    // A model that fails sends nothing and gives the slot back; a short answer is dropped.
    replies(rx, { session_id: 'x', notification: { prompt: 'Nudge {{user_name}}', params: ALL } }, { session_id: 'x', notification: { prompt: 'Nudge {{user_name}}', params: ALL } }, { session_id: 'x', notification: { prompt: 'Nudge {{user_name}}', params: ALL } });
    await advance(ts, PROACTIVE_INTERVAL_MS);
    fake.script({ kind: 'status', status: 500 }, { kind: 'answer', content: { notification: 'ok' } }, { kind: 'answer', content: { notification: 'Drink some water, Ana.' } });
    await say(ts, c, stream, 'Where was I?', 'SPEAKER_00', 1.5);
    await untilOutcomes(ts, 'u1', 2);
    await say(ts, c, stream, 'Right.', 'SPEAKER_00', 3);
    await untilOutcomes(ts, 'u1', 3);
    await say(ts, c, stream, 'Go on.', 'SPEAKER_00', 4.5);
    const recs = await untilOutcomes(ts, 'u1', 4);
    t.same(recs.map((r) => r.outcome), ['sent', 'failed', 'too_short', 'sent']);
    t.equal(fake.requests[3]!.body.messages[1].content, 'Nudge Ana');
    t.same((await outbox(ts, 'u1')).map((x) => x.body).slice(0, 2), ['Drink some water, Ana.', 'Ana, call the dentist before Tuesday.']);
    c.close();
  });
}

t.test('offline: undeclared, ungranted and unasked scopes stay empty; one per 30 s; under 5 characters is dropped and frees the slot', async (t) => {
  const engine = new RecordingSttEngine();
  const ts = await startService(t, { env: ENV, sttEngines: [engine] });
  const rx = await startReceiver(t);
  const app = await proactiveApp(ts, 'dev2', 'u2', rx.url, ['user_name']);
  rx.secret = app.webhookSecret;
  // Declared after the install: the user never granted it.
  const patched = await ts.req(`/v1/apps/${app.id}`, { method: 'PATCH', headers: bearer(await ts.token('dev2')), body: { proactive_notification: { scopes: ['user_name', 'user_facts'] } } });
  t.equal(patched.status, 200);
  await setName(ts, 'u2', 'Ben');
  await remember(ts, 'u2', 'Ben likes jazz');
  await pastConversation(ts, 'u2', 'Jazz Night', 'Went to a jazz club.');

  const ask = { session_id: 'x', notification: { prompt: 'Hello   {{user_name}}, you like: {{user_facts}} {{user_context}} {{user_chat}}', params: ['user_name', 'user_facts', 'user_chat'] } };
  replies(rx, ask, ask, ask, { session_id: 'x', notification: { prompt: 'Hey {{user_facts}}', params: ['user_facts'] } }, ask);
  const { c, stream } = await streaming(ts, engine, 'u2');
  await say(ts, c, stream, 'Some jazz tonight?', 'SPEAKER_00', 0.2);
  await untilOutcomes(ts, 'u2', 1);
  t.match(await outbox(ts, 'u2'), [{ title: 'Dental Buddy', body: 'Hello Ben, you like:', source: 'proactive' }], 'the filled prompt, whitespace collapsed, is the notification');

  await say(ts, c, stream, 'Maybe later.', 'SPEAKER_01', 1.5);
  await untilOutcomes(ts, 'u2', 2);
  t.equal((await outbox(ts, 'u2')).length, 1, 'a second request within 30 s sends nothing');

  await advance(ts, PROACTIVE_INTERVAL_MS);
  await say(ts, c, stream, 'Jazz it is.', 'SPEAKER_00', 3);
  await untilOutcomes(ts, 'u2', 3);
  t.equal((await outbox(ts, 'u2')).length, 2, 'after 30 s the next one is sent');

  await advance(ts, PROACTIVE_INTERVAL_MS);
  await say(ts, c, stream, 'What do I like?', 'SPEAKER_00', 4.5);
  await untilOutcomes(ts, 'u2', 4);
  await say(ts, c, stream, 'Tell me.', 'SPEAKER_00', 6);
  const recs = await untilOutcomes(ts, 'u2', 5);
  t.same(recs.map((r) => r.outcome), ['sent', 'rate_limited', 'sent', 'too_short', 'sent'], 'the "Hey " answer is dropped and the next one goes out at once');
  t.ok(recs.every((r) => r.app_id === app.id && r.trigger === 'notification'));
  t.same((await outbox(ts, 'u2')).map((n) => n.body), ['Hello Ben, you like:', 'Hello Ben, you like:', 'Hello Ben, you like:']);
  c.close();
});

t.test('a reply message is pushed as it is, to the outbox and through FCM; a prompt over the bound is refused and the app owner told', async (t) => {
  const account = writeServiceAccount();
  const fcm = await startFakeFcm(account);
  t.teardown(() => fcm.close());
  const engine = new RecordingSttEngine();
  const ts = await startService(t, { env: { ...ENV, FCM_SERVICE_ACCOUNT_FILE: account.file, FCM_TOKEN_URL: fcm.tokenUrl, FCM_BASE_URL: fcm.url }, sttEngines: [engine] });
  const token = 'cU3device0001234567890abcdef:APA91bPhone';
  t.equal((await ts.req('/v1/users/fcm-token', { method: 'POST', headers: bearer(await ts.token('u3')), body: { fcm_token: token } })).status, 200);
  const user = await startReceiver(t);
  const saved = await ts.req('/v1/users/developer/webhook/realtime_transcript', { method: 'POST', headers: bearer(await ts.token('u3')), body: { url: user.url } });
  t.equal(saved.status, 200);
  user.secret = (await ts.req('/v1/users/developer/webhook-secret', { headers: bearer(await ts.token('u3')) })).json.secret as string;
  replies(user, { message: 'Stand up and stretch now' });
  const rx = await startReceiver(t);
  const app = await proactiveApp(ts, 'dev3', 'u3', rx.url, ['user_facts'], 'Long Talker');
  rx.secret = app.webhookSecret;
  await remember(ts, 'u3', 'Likes long walks along the river at dusk');
  const prompt = '{{user_facts}}'.repeat(250);
  replies(rx, { session_id: 'x', notification: { prompt, params: ['user_facts'] } });

  const { c, stream } = await streaming(ts, engine, 'u3');
  await say(ts, c, stream, 'Hello there.', 'SPEAKER_00', 0.2);
  const recs = await untilOutcomes(ts, 'u3', 2);
  t.same(recs.map((r) => `${r.app_id ?? 'webhook'}:${r.trigger}:${r.outcome}`).sort(), [`${app.id}:notification:too_long`, 'webhook:message:sent'].sort());
  const pushed = await outbox(ts, 'u3');
  t.match(pushed, [{ title: 'Webhook says', body: 'Stand up and stretch now', source: 'webhook', app_id: null }], 'only the message reached the user');
  await until(() => fcm.sent.length === 1, { what: 'the push at FCM' });
  t.same(fcm.sent[0], { token, title: 'Webhook says', body: 'Stand up and stretch now', data: { notification_type: 'webhook', notification_id: String(pushed[0].id) } });
  const notice = await outbox(ts, 'dev3');
  t.match(notice, [{ title: 'Long Talker: prompt too long', source: 'system', app_id: app.id }], 'the owner is told');
  t.match(notice[0].body, String(MAX_PROMPT_CHARS));
  t.ok(user.received[0]!.verified && rx.received[0]!.verified);
  c.close();
});

t.test('the 30 s window holds across listen nodes: the user reconnects to another node', async (t) => {
  const engineA = new RecordingSttEngine();
  const engineB = new RecordingSttEngine();
  const a = await startService(t, { store: 'pg', env: ENV, sttEngines: [engineA] });
  const b = await startService(t, { sameDeploymentAs: a, clock: a.clock, sttEngines: [engineB] });
  const rx = await startReceiver(t);
  const app = await proactiveApp(a, 'dev4', 'u4', rx.url, ['user_name']);
  rx.secret = app.webhookSecret;
  const ask = { session_id: 'x', notification: { prompt: 'Time for a break, {{user_name}}.', params: ['user_name'] } };
  replies(rx, ask, ask);
  const one = await streaming(a, engineA, 'u4');
  await say(a, one.c, one.stream, 'Working hard.', 'SPEAKER_00', 0.2);
  await untilOutcomes(a, 'u4', 1);
  one.c.close();
  const two = await streaming(b, engineB, 'u4');
  await say(b, two.c, two.stream, 'Still working.', 'SPEAKER_00', 0.2);
  const recs = await untilOutcomes(a, 'u4', 2);
  t.same(recs.map((r) => r.outcome), ['sent', 'rate_limited'], 'the second node found the window taken');
  t.equal((await outbox(b, 'u4')).length, 1);
  two.c.close();
});
