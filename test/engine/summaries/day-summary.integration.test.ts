// The day summary against the real service: users picked by local hour across time zones, each SPEC skip rule, the
// lock shared by two nodes, the webhook body verified at a real receiver, the LLM path and its failure, the push,
// and the user's routes (list, read, on demand).
import t, { type Test } from 'tap';
import { startService, type TestService } from '../../helpers/service.js';
import { bearer } from '../../helpers/http.js';
import { waitFor } from '../../helpers/until.js';
import { receiver, secretOf, setUserHook, verified } from '../../helpers/webhooks.js';
import { startFakeOpenAI } from '../../fakes/openai-server.js';
import { ManualClock } from '../../../engine/clock.js';
import { ConversationStatus } from '../../../engine/protocol.js';
import { daySummaries } from '../../../engine/summaries/day-summary.js';
import { HOURLY_SCHEDULER_ID } from '../../../engine/summaries/schedule.js';
import type { Geolocation } from '../../../engine/db/conversations.js';
import { STORES, type StoreKind } from '../../helpers/stores.js';

const PRIVATE_OK = { WEBHOOK_ALLOW_PRIVATE: 'on' };
const at = (iso: string): number => Date.parse(iso);

async function userWith(s: TestService, uid: string, o: { zone?: string | null; hour?: number; enabled?: boolean; token?: boolean } = {}): Promise<void> {
  const { userSettings } = s.service.services;
  const now = s.clock.now();
  await userSettings.update(uid, { timeZone: o.zone === undefined ? 'UTC' : o.zone, dailySummaryHour: o.hour ?? 22, dailySummaryEnabled: o.enabled ?? true }, now);
  if (o.token ?? true) await userSettings.saveToken(uid, `device-${uid}`, null, now);
}

interface Conv {
  start: string;
  minutes?: number;
  lines?: string[];
  title?: string;
  overview?: string;
  emoji?: string;
  discarded?: boolean;
  geolocation?: Geolocation;
  actions?: { description: string; dueAt: string | null }[];
}

async function conversation(s: TestService, uid: string, c: Conv): Promise<string> {
  const { conversations, users } = s.service.services;
  await users.ensure(uid, s.clock.now());
  const start = at(c.start);
  const lines = c.lines ?? ['We decided to ship on Friday.', 'Who will write the release notes?'];
  const rec = await conversations.create({
    userId: uid,
    status: ConversationStatus.PROCESSING,
    startedAt: new Date(start).toISOString(),
    finishedAt: new Date(start + (c.minutes ?? 10) * 60_000).toISOString(),
    source: 'omi',
    language: 'en',
    ...(c.geolocation ? { geolocation: c.geolocation } : {}),
    segments: lines.map((text, i) => ({ text, start: i * 5, end: i * 5 + 4, speaker: `SPEAKER_0${i % 2}`, speakerId: i % 2, isUser: i % 2 === 0 })),
    now: s.clock.now(),
  });
  await conversations.saveResult(rec.id, {
    discarded: c.discarded ?? false,
    structured: { title: c.title ?? 'Release Planning', overview: c.overview ?? 'The team planned the release.', emoji: c.emoji ?? '🚀', category: 'work', actionItems: c.actions ?? [], events: [] },
    memories: [],
    producedBy: 'builtin',
  }, s.clock.now());
  return rec.id;
}

const run = (s: TestService) => daySummaries(s.service.services);

t.test('users are picked by their local hour from UTC−11 to UTC+14, with the noon rule', async (t) => {
  const s = await startService(t);
  await userWith(s, 'pago', { zone: 'Pacific/Pago_Pago', hour: 23 });
  await userWith(s, 'kiri', { zone: 'Pacific/Kiritimati', hour: 0 });
  await userWith(s, 'kolkata', { zone: 'Asia/Kolkata', hour: 15 });
  await userWith(s, 'ny', { zone: 'America/New_York', hour: 6 });
  await userWith(s, 'other-hour', { zone: 'Pacific/Kiritimati', hour: 1 });
  await userWith(s, 'off', { zone: 'Pacific/Pago_Pago', hour: 23, enabled: false });
  await userWith(s, 'no-zone', { zone: null, hour: 10 });
  // 2026-03-08T10:00Z: 23:00 on the 7th in Pago Pago, 00:00 on the 9th on Kiritimati, 15:30 in Kolkata, and 06:00 in
  // New York, where daylight saving began at 07:00Z that morning.
  const due = await run(s).due(at('2026-03-08T10:00:00Z'));
  t.same(due.sort((a, b) => a.uid.localeCompare(b.uid)), [
    { uid: 'kiri', date: '2026-03-08' },
    { uid: 'kolkata', date: '2026-03-08' },
    { uid: 'ny', date: '2026-03-07' },
    { uid: 'pago', date: '2026-03-07' },
  ]);
  t.same(await run(s).due(at('2026-03-08T11:00:00Z')), [{ uid: 'other-hour', date: '2026-03-08' }], 'an hour later, 01:00 on Kiritimati');
});

for (const store of STORES) {
  t.test(`${store}: a run on the New York spring-forward day: stored, pushed, webhook body field by field`, async (t) => {
    const clock = new ManualClock(at('2026-03-09T02:00:00Z'));
    const s = await startService(t, { store: store as StoreKind, clock, env: PRIVATE_OK });
    const rx = await receiver(t);
    await userWith(s, 'u1', { zone: 'America/New_York', hour: 22 });
    await setUserHook(s, 'u1', rx.url, 'day_summary');
    // The local day of 2026-03-08 is 23 hours: 05:00Z to 04:00Z the next day.
    const c1 = await conversation(s, 'u1', {
      start: '2026-03-08T14:05:00Z', minutes: 25, title: "Coffee with Anna", overview: "Anna's back from Zürich.", emoji: '☕',
      geolocation: { latitude: 47, longitude: 8.5417, address: 'Café Zürich' },
      actions: [{ description: 'Book the dentist', dueAt: '2026-03-10T09:00:00.000Z' }, { description: 'Send the slides', dueAt: null }],
    });
    const c2 = await conversation(s, 'u1', { start: '2026-03-09T01:30:00Z', minutes: 10 });
    await conversation(s, 'u1', { start: '2026-03-08T04:30:00Z', title: 'Late on the 7th' });
    await conversation(s, 'u1', { start: '2026-03-08T16:00:00Z', title: 'Thrown away', discarded: true });
    await conversation(s, 'u2', { start: '2026-03-08T16:00:00Z', title: 'Someone else' });

    const schedule = s.service.daySummarySchedule!;
    t.equal(await schedule.runHour(clock.now()), 1, 'one user due');
    const got = await waitFor(() => rx.received[0], { what: 'the day_summary webhook', timeoutMs: 15_000 });
    t.equal(got.query.get('uid'), 'u1');
    // The receiver checks the signature's timestamp against its own clock: here the deployment's, set to that night.
    const secret = await secretOf(s, 'user', 'u1');
    const realNow = Date.now;
    Date.now = () => clock.now();
    let body: any;
    try {
      body = verified(got, secret);
    } finally {
      Date.now = realNow;
    }
    t.same(Object.keys(body), ['uid', 'created_at', 'summary_json', 'summary']);
    t.equal(body.uid, 'u1');
    t.match(body.created_at, /^2026-03-09T02:00:00(\.\d+)?\+00:00$/, 'send time, ISO 8601 with +00:00');
    const j = body.summary_json;
    t.same(Object.keys(j), ['id', 'date', 'created_at', 'headline', 'overview', 'day_emoji', 'stats', 'highlights', 'action_items', 'unresolved_questions', 'decisions_made', 'knowledge_nuggets', 'locations']);
    t.equal(j.date, '2026-03-08');
    t.equal(j.created_at, '2026-03-09T02:00:00.000', 'naive UTC');
    t.same(j.stats, { total_conversations: 2, total_duration_minutes: 35, action_items_count: 2 }, 'the two kept conversations of the local day');
    t.equal(j.headline, 'Coffee with Anna', 'the longest conversation leads');
    t.equal(j.day_emoji, '☕');
    t.same(j.highlights.map((h: any) => h.conversation_ids), [[c1], [c2]]);
    t.same(j.action_items, [
      { description: 'Book the dentist', priority: 'high', completed: false, source_conversation_id: c1 },
      { description: 'Send the slides', priority: 'medium', completed: false, source_conversation_id: c1 },
    ]);
    t.same(j.unresolved_questions, [{ question: 'Who will write the release notes?', conversation_id: c1 }]);
    t.same(j.decisions_made, [{ decision: 'We decided to ship on Friday.', conversation_id: c1 }]);
    t.same(j.knowledge_nuggets, []);
    t.same(j.locations, [{ name: 'Café Zürich', latitude: 47, longitude: 8.5417, time: '10:05' }], 'local time of the start, EDT');
    t.match(body.summary, /^\{'id': '[0-9a-f-]{36}', 'date': '2026-03-08', /);
    t.ok(body.summary.includes(`'overview': "Anna's back from Zürich. The team planned the release."`), 'Python quoting, non-ASCII as is');
    t.ok(body.summary.includes(`'locations': [{'name': 'Café Zürich', 'latitude': 47.0, 'longitude': 8.5417, 'time': '10:05'}]`));
    t.ok(body.summary.includes(`'completed': False`));

    const token = bearer(await s.token('u1'));
    const list = await s.req('/v1/users/daily-summaries', { headers: token });
    t.equal(list.status, 200);
    t.same(list.json, [j], 'the stored summary is what was sent');
    t.same((await s.req(`/v1/users/daily-summaries/${j.id}`, { headers: token })).json, j);
    t.equal((await s.req(`/v1/users/daily-summaries/${j.id}`, { headers: bearer(await s.token('u2')) })).status, 404, "another user's summary");
    const pushes = (await s.req('/v1/notifications', { headers: token })).json;
    t.equal(pushes.length, 1);
    t.equal(pushes[0].title, '☕ Coffee with Anna');
    t.equal(pushes[0].body, j.overview);
    t.equal(pushes[0].source, 'day_summary');
    t.equal(pushes[0].data.navigate_to, `/daily-summary/${j.id}`);
  });
}

t.test('the skip rules, each with its outcome; the lock before generation', async (t) => {
  const clock = new ManualClock(at('2026-06-15T22:00:00Z'));
  const s = await startService(t, { clock });
  const date = '2026-06-15';
  await userWith(s, 'no-token', { token: false });
  await conversation(s, 'no-token', { start: '2026-06-15T09:00:00Z' });
  t.equal(await run(s).deliver('no-token', date), 'no_push_token');
  await userWith(s, 'empty');
  await conversation(s, 'empty', { start: '2026-06-14T09:00:00Z' });
  t.equal(await run(s).deliver('empty', date), 'no_conversations', 'only a conversation of another day');
  await userWith(s, 'silent');
  await conversation(s, 'silent', { start: '2026-06-15T08:00:00Z', discarded: true });
  await conversation(s, 'silent', { start: '2026-06-15T09:00:00Z', lines: ['  ', ''] });
  t.equal(await run(s).deliver('silent', date), 'nothing_transcribed', 'one discarded, one without words');
  await userWith(s, 'ok');
  await conversation(s, 'ok', { start: '2026-06-15T09:00:00Z' });
  t.equal(await run(s).deliver('ok', date), 'delivered');
  t.equal(await run(s).deliver('ok', date), 'locked', 'the same user and date again');
  t.equal(await s.service.services.redis.pttl(`${s.env.REDIS_PREFIX}:users:ok:daily_summary_lock:${date}`) > 7_100_000, true, 'the lock lives 2 hours');
  t.equal((await run(s).repo.list('ok', 10, 0)).length, 1);
  t.same(await run(s).repo.list('no-token', 10, 0), []);
});

t.test('two nodes: one scheduler, one delivery per user and date', async (t) => {
  const clock = new ManualClock(at('2026-06-15T22:00:00Z'));
  const a = await startService(t, { clock });
  const b = await startService(t, { clock, sameDeploymentAs: a });
  await userWith(a, 'u1');
  await conversation(a, 'u1', { start: '2026-06-15T09:00:00Z' });
  const outcomes = await Promise.all([run(a).deliver('u1', '2026-06-15'), run(b).deliver('u1', '2026-06-15')]);
  t.same(outcomes.sort(), ['delivered', 'locked']);
  const schedulers = await a.service.daySummarySchedule!.queue.getJobSchedulers();
  t.equal(schedulers.length, 1, 'both nodes registered the same scheduler');
  t.equal(schedulers[0]!.key, HOURLY_SCHEDULER_ID);
  t.equal(schedulers[0]!.pattern, '0 * * * *');
  t.equal(schedulers[0]!.tz, 'UTC');
});

async function withLlm(t: Test) {
  const llm = await startFakeOpenAI();
  t.teardown(() => llm.close());
  const clock = new ManualClock(at('2026-06-15T22:00:00Z'));
  const s = await startService(t, { clock, env: { LLM_BASE_URL: llm.baseUrl, LLM_MAX_RETRIES: '0' } });
  await userWith(s, 'u1');
  const id = await conversation(s, 'u1', { start: '2026-06-15T09:00:00Z', actions: [{ description: 'Book the dentist', dueAt: null }] });
  return { llm, s, id };
}

const answer = (id: string) => ({
  headline: 'Shipping Day',
  overview: 'You planned the release with the team.',
  day_emoji: '📦',
  highlights: [{ topic: 'Release', emoji: '🚀', summary: 'Friday it is.', conversation_ids: [id] }],
  unresolved_questions: [{ question: 'Who writes the notes?', conversation_id: id }],
  decisions_made: [{ decision: 'Ship on Friday', conversation_id: id }],
  knowledge_nuggets: [],
});

t.test('with an LLM: its text fields, with stats and action items from the store', async (t) => {
  const { llm, s, id } = await withLlm(t);
  llm.script({ kind: 'answer', content: answer(id) });
  t.equal(await run(s).deliver('u1', '2026-06-15'), 'delivered');
  const [j] = await run(s).repo.list('u1', 1, 0);
  t.equal(j!.headline, 'Shipping Day');
  t.same(j!.decisions_made, [{ decision: 'Ship on Friday', conversation_id: id }]);
  t.same(j!.stats, { total_conversations: 1, total_duration_minutes: 10, action_items_count: 1 });
  t.same(j!.action_items, [{ description: 'Book the dentist', priority: 'medium', completed: false, source_conversation_id: id }]);
  t.equal(llm.requests[0]!.body.response_format.json_schema.name, 'day_summary');
  t.match(llm.requests[0]!.body.messages[1].content, `conversation_id: ${id}`);
});

t.test('with an LLM: a bad answer is retried once, then the summary fails visibly and the lock is freed', async (t) => {
  const { llm, s, id } = await withLlm(t);
  llm.script({ kind: 'raw', content: 'not json' }, { kind: 'answer', content: { ...answer(id), decisions_made: [{ decision: 'x', conversation_id: 'unknown' }] } });
  t.equal(await run(s).deliver('u1', '2026-06-15'), 'failed');
  t.equal(llm.requests.length, 2);
  t.same(await run(s).repo.list('u1', 10, 0), []);
  llm.script({ kind: 'raw', content: '{}' }, { kind: 'answer', content: answer(id) });
  t.equal(await run(s).deliver('u1', '2026-06-15'), 'delivered', 'the retry passes; a later run may try again');
  t.equal(llm.requests.length, 4);
});

t.test('on demand: 400 without a push token; else stored and pushed, never sent to the webhook', async (t) => {
  const clock = new ManualClock(at('2026-06-15T08:00:00Z'));
  const s = await startService(t, { clock, env: PRIVATE_OK });
  const rx = await receiver(t);
  await userWith(s, 'u1', { zone: 'Europe/Berlin', token: false });
  await setUserHook(s, 'u1', rx.url, 'day_summary');
  await conversation(s, 'u1', { start: '2026-06-14T09:00:00Z' });
  const headers = bearer(await s.token('u1'));
  const refused = await s.req('/v1/users/daily-summaries', { method: 'POST', headers });
  t.equal(refused.status, 400);
  t.match(refused.json.detail, /push token/);
  await s.service.services.userSettings.saveToken('u1', 'device-u1', null, clock.now());
  const made = await s.req('/v1/users/daily-summaries', { method: 'POST', headers });
  t.equal(made.status, 200);
  t.equal(made.json.date, '2026-06-14', '10:00 in Berlin: the previous day');
  t.equal(made.json.stats.total_conversations, 1);
  t.same(await s.service.services.webhookQueue.deliveries.listForOwner('user', 'u1', 10, 0), [], 'no webhook delivery');
  t.equal((await s.req('/v1/notifications', { headers })).json[0].title, '🚀 Release Planning');
  await userWith(s, 'u3');
  t.equal((await s.req('/v1/users/daily-summaries', { method: 'POST', headers: bearer(await s.token('u3')) })).status, 404, 'nothing to summarise');
});
