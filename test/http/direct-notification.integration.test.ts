// The direct notification over real sockets: each of its answers, the rate-limit headers on every one, the outbox
// row it makes, and the hourly limit shared by two API nodes.
import t from 'tap';
import type http from 'node:http';
import { startService } from '../helpers/service.js';
import { bearer } from '../helpers/http.js';
import { createApp, direct, install } from '../helpers/notifications.js';
import { ManualClock } from '../../engine/clock.js';

/** 10:15 UTC: the clock hour ends in 45 minutes. */
const AT = Date.UTC(2026, 11, 2, 10, 15, 0);
const HOUR_END_S = Date.UTC(2026, 11, 2, 11, 0, 0) / 1000;

t.test('direct notifications: every answer, the hourly limit across two API nodes', async (t) => {
  const clock = new ManualClock(AT);
  const a = await startService(t, { clock });
  const b = await startService(t, { clock, sameDeploymentAs: a });
  const app = await createApp(a, 'dev', 'Focus Coach');
  const other = await createApp(a, 'dev', 'Other App');
  await install(a, 'alice', app.id);
  await install(a, 'bob', other.id);
  const auth = bearer(app.secret);

  const expectHeaders = (res: { headers: http.IncomingHttpHeaders }, remaining: number, what: string): void => {
    t.equal(res.headers['x-ratelimit-limit'], '10', `${what}: X-RateLimit-Limit`);
    t.equal(res.headers['x-ratelimit-remaining'], String(remaining), `${what}: X-RateLimit-Remaining`);
    t.equal(res.headers['x-ratelimit-reset'], String(HOUR_END_S), `${what}: X-RateLimit-Reset is the Unix time the hour ends`);
  };
  const missing = "Missing or invalid Authorization header. Must be 'Bearer API_KEY'";

  let res = await direct(a, app.id, { uid: 'alice', message: 'Time to stretch' });
  t.same([res.status, res.json], [401, { detail: missing }], 'no Authorization header');
  expectHeaders(res, 10, 'no header');
  res = await direct(a, app.id, { uid: 'alice', message: 'Time to stretch' }, { authorization: `Basic ${app.secret}` });
  t.same([res.status, res.json], [401, { detail: missing }], 'not a bearer header');
  res = await direct(a, app.id, { uid: 'alice', message: 'Time to stretch' }, bearer(other.secret));
  t.same([res.status, res.json], [401, { detail: 'Invalid API Key' }], "another app's secret");
  expectHeaders(res, 10, 'wrong secret');
  res = await direct(a, app.id, { uid: 'alice', message: 'Time to stretch' }, bearer('svc_app_notarealsecret'));
  t.equal(res.status, 401, 'a malformed secret');
  res = await direct(a, '00000000-0000-4000-8000-000000000000', { uid: 'alice', message: 'Time to stretch' }, auth);
  t.same([res.status, res.json], [404, { detail: 'App not found' }], 'unknown app');
  res = await direct(a, app.id, { uid: 'nobody', message: 'Time to stretch' }, auth);
  t.same([res.status, res.json], [404, { detail: 'User not found' }], 'unknown user');
  res = await direct(a, app.id, { uid: 'bob', message: 'Time to stretch' }, auth);
  t.same([res.status, res.json], [404, { detail: 'User does not have this app installed' }], 'a user who did not install the app');
  expectHeaders(res, 10, 'not installed');
  for (const [query, what] of [
    [{ uid: 'alice' }, 'no message'],
    [{ uid: 'alice', message: '' }, 'an empty message'],
    [{ uid: 'alice', message: '   ' }, 'a blank message'],
    [{ uid: 'alice', message: 'x'.repeat(2001) }, 'a message over 2,000 characters'],
    [{ message: 'Time to stretch' }, 'no uid'],
  ] as const) {
    res = await direct(a, app.id, query, auth);
    t.equal(res.status, 422, what);
    t.equal(res.json.detail[0].loc[0], 'query', `${what}: a validation error on the query`);
    t.ok(res.headers['x-ratelimit-remaining'], `${what}: with the rate-limit headers`);
  }

  res = await direct(a, app.id, { uid: 'alice', message: 'Time to stretch 🧘 — “now”' }, auth);
  t.same([res.status, res.json], [200, { status: 'Ok' }], 'sent');
  expectHeaders(res, 9, 'the first');
  const list = await a.req('/v1/notifications', { headers: bearer(await a.token('alice')) });
  t.equal(list.json.length, 1);
  t.match(list.json[0], { title: 'Focus Coach says', body: 'Time to stretch 🧘 — “now”', source: 'app', app_id: app.id, read_at: null, data: { notification_type: 'plugin', navigate_to: `/chat/${app.id}`, app_id: app.id } }, 'in the outbox, titled after the app, opening its chat');

  // Nine more, alternating between the two nodes: the window is shared through Redis.
  for (let i = 2; i <= 10; i++) {
    res = await direct(i % 2 === 0 ? b : a, app.id, { uid: 'alice', message: `Reminder number ${i}` }, auth);
    t.equal(res.status, 200, `notification ${i}`);
  }
  expectHeaders(res, 0, 'the tenth');
  for (const node of [a, b]) {
    res = await direct(node, app.id, { uid: 'alice', message: 'One too many' }, auth);
    t.same([res.status, res.json], [429, { detail: 'Rate limit exceeded. Maximum 10 notifications per hour.' }], 'the eleventh is refused on either node');
    t.equal(res.headers['retry-after'], String(45 * 60), 'Retry-After: until the hour ends');
    expectHeaders(res, 0, 'refused');
  }
  t.equal((await a.req('/v1/notifications?limit=100', { headers: bearer(await a.token('alice')) })).json.length, 10, 'the refused ones are not in the outbox');

  clock.set(Date.UTC(2026, 11, 2, 11, 0, 5));
  res = await direct(b, app.id, { uid: 'alice', message: 'A new hour' }, auth);
  t.equal(res.status, 200, 'the next clock hour has a fresh window');
  t.equal(res.headers['x-ratelimit-remaining'], '9');
  t.equal(res.headers['x-ratelimit-reset'], String(Date.UTC(2026, 11, 2, 12) / 1000));
});
