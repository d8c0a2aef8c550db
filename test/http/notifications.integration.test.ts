// Notifications over real sockets: user settings and push tokens (sqlite and PostgreSQL), the direct notification
// through each of its answers with the rate-limit headers on every one and the hourly limit shared by two API nodes,
// and the outbox read as a list and as a server-sent event stream on another node, resumed with Last-Event-ID.
import t from 'tap';
import http from 'node:http';
import { startService, type TestService } from '../helpers/service.js';
import { bearer } from '../helpers/http.js';
import { STORES } from '../helpers/stores.js';
import { until } from '../helpers/until.js';
import { ManualClock } from '../../engine/clock.js';

/** 10:15 UTC: the clock hour ends in 45 minutes. */
const AT = Date.UTC(2026, 11, 2, 10, 15, 0);
const HOUR_END_S = Date.UTC(2026, 11, 2, 11, 0, 0) / 1000;

async function createApp(s: TestService, owner: string, name: string, isPrivate = false): Promise<{ id: string; secret: string }> {
  const res = await s.req('/v1/apps', { method: 'POST', headers: bearer(await s.token(owner)), body: { name, capabilities: [], private: isPrivate } });
  if (res.status !== 200) throw new Error(`app creation failed: ${res.status} ${res.text}`);
  return { id: res.json.id as string, secret: res.json.secret as string };
}

async function install(s: TestService, uid: string, appId: string): Promise<void> {
  const res = await s.req(`/v1/apps/${appId}/install`, { method: 'POST', headers: bearer(await s.token(uid)) });
  if (res.status !== 200) throw new Error(`install failed: ${res.status} ${res.text}`);
}

const direct = (s: TestService, appId: string, query: Record<string, string>, headers: Record<string, string> = {}) =>
  s.req(`/v2/integrations/${appId}/notification?${new URLSearchParams(query).toString()}`, { method: 'POST', headers });

/** A server-sent event stream read with node:http, its events parsed as they arrive. */
interface EventStream {
  events: { id: string; event: string; data: any }[];
  comments: string[];
  status: number;
  contentType: string;
  close(): void;
}

function openStream(s: TestService, token: string, lastEventId?: string): Promise<EventStream> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = { ...bearer(token), accept: 'text/event-stream', ...(lastEventId ? { 'last-event-id': lastEventId } : {}) };
    const req = http.get(`${s.url}/v1/notifications/stream`, { headers, agent: false }, (res) => {
      const out: EventStream = { events: [], comments: [], status: res.statusCode ?? 0, contentType: String(res.headers['content-type']), close: () => req.destroy() };
      let buf = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        buf += chunk;
        let end;
        while ((end = buf.indexOf('\n\n')) >= 0) {
          const block = buf.slice(0, end);
          buf = buf.slice(end + 2);
          const fields: Record<string, string> = {};
          for (const line of block.split('\n')) {
            if (line.startsWith(':')) out.comments.push(line.slice(1).trim());
            else {
              const i = line.indexOf(':');
              fields[line.slice(0, i)] = line.slice(i + 1).replace(/^ /, '');
            }
          }
          if (fields.data !== undefined) out.events.push({ id: fields.id ?? '', event: fields.event ?? 'message', data: JSON.parse(fields.data) });
        }
      });
      res.on('error', () => undefined);
      resolve(out);
    });
    req.on('error', (err) => ((err as NodeJS.ErrnoException).code === 'ECONNRESET' ? undefined : reject(err)));
  });
}

for (const store of STORES) {
  t.test(`settings and push tokens on ${store}`, async (t) => {
    const s = await startService(t, { store });
    const alice = bearer(await s.token('alice'));
    const bob = bearer(await s.token('bob'));
    const settings = s.service.services.userSettings;

    const defaults = await s.req('/v1/users/settings', { headers: alice });
    t.equal(defaults.status, 200);
    t.same(defaults.json, { name: null, time_zone: null, language: null, daily_summary_enabled: true, daily_summary_hour: 22 }, 'defaults before any save');

    for (const [body, field] of [
      [{ time_zone: 'Mars/Olympus_Mons' }, 'time_zone'],
      [{ time_zone: '+05:00' }, 'time_zone'],
      [{ daily_summary_hour: 24 }, 'daily_summary_hour'],
      [{ daily_summary_hour: -1 }, 'daily_summary_hour'],
      [{ language: 'not a language tag!' }, 'language'],
    ] as const) {
      const res = await s.req('/v1/users/settings', { method: 'PATCH', headers: alice, body });
      t.equal(res.status, 422, `${JSON.stringify(body)} is refused`);
      t.same(res.json.detail[0].loc, ['body', field], 'naming the field');
    }
    t.equal((await s.req('/v1/users/settings', { method: 'PATCH', headers: alice, body: {} })).status, 422, 'an empty change is refused');

    const saved = await s.req('/v1/users/settings', { method: 'PATCH', headers: alice, body: { name: ' Alice ', time_zone: 'america/new_york', language: 'pt-br', daily_summary_hour: 7 } });
    t.equal(saved.status, 200);
    t.same(saved.json, { name: 'Alice', time_zone: 'America/New_York', language: 'pt-BR', daily_summary_enabled: true, daily_summary_hour: 7 }, 'saved in canonical form');
    const off = await s.req('/v1/users/settings', { method: 'PATCH', headers: alice, body: { daily_summary_enabled: false, name: null } });
    t.same(off.json, { name: null, time_zone: 'America/New_York', language: 'pt-BR', daily_summary_enabled: false, daily_summary_hour: 7 }, 'other fields kept');
    t.same((await s.req('/v1/users/settings', { headers: bob })).json.daily_summary_hour, 22, "another user's settings are their own");

    const tokenA = 'dA1b2C3d4E5f6G7h8I9j:APA91bHPhone';
    const tokenB = 'eZ9y8X7w6V5u4T3s2R1q:APA91bHWatch';
    t.equal((await s.req('/v1/users/fcm-token', { method: 'POST', headers: alice, body: { fcm_token: tokenA } })).status, 200);
    const second = await s.req('/v1/users/fcm-token', { method: 'POST', headers: alice, body: { fcm_token: tokenB, time_zone: 'Pacific/Kiritimati' } });
    t.same(second.json, { status: 'Ok' });
    await s.req('/v1/users/fcm-token', { method: 'POST', headers: alice, body: { fcm_token: tokenA } });
    t.same((await settings.tokens('alice')).map((x) => x.token).sort(), [tokenA, tokenB].sort(), 'one token per device, registering again keeps one');
    t.equal((await s.req('/v1/users/settings', { headers: alice })).json.time_zone, 'Pacific/Kiritimati', "a token's time zone is saved to the settings");
    t.equal((await s.req('/v1/users/fcm-token', { method: 'POST', headers: alice, body: { fcm_token: tokenA, time_zone: 'Nowhere/Land' } })).status, 422, 'a bad time zone with a token is refused');
    t.equal((await s.req('/v1/users/fcm-token', { method: 'POST', headers: alice, body: { fcm_token: '' } })).status, 422, 'an empty token is refused');

    await s.req('/v1/users/fcm-token', { method: 'POST', headers: bob, body: { fcm_token: tokenB } });
    t.same((await settings.tokens('alice')).map((x) => x.token), [tokenA], 'a device signed in to another account follows it');
    t.equal((await s.req('/v1/users/fcm-token', { method: 'DELETE', headers: alice, body: { fcm_token: tokenB } })).status, 404, "another user's token is not yours to remove");
    t.equal((await s.req('/v1/users/fcm-token', { method: 'DELETE', headers: alice, body: { fcm_token: tokenA } })).status, 204);
    t.same(await settings.tokens('alice'), [], 'removed');
    t.equal((await s.req('/v1/users/settings', { headers: {} })).status, 401, 'the ID token is required');
  });
}

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

for (const store of STORES) t.test(`the outbox on ${store}: pages, read marks, and a stream on another node resumed with Last-Event-ID`, async (t) => {
  const clock = new ManualClock(AT);
  const a = await startService(t, { clock, store });
  const b = await startService(t, { clock, sameDeploymentAs: a });
  const app = await createApp(a, 'dev', 'Journal');
  await install(a, 'alice', app.id);
  const alice = await b.token('alice');
  const send = async (message: string): Promise<void> => {
    const res = await direct(a, app.id, { uid: 'alice', message }, bearer(app.secret));
    if (res.status !== 200) throw new Error(`send failed: ${res.status}`);
  };

  const stream = await openStream(b, alice);
  t.teardown(() => stream.close());
  t.equal(stream.status, 200);
  t.match(stream.contentType, /^text\/event-stream/);
  await until(() => stream.comments.includes('open'), { what: 'the stream to open' });
  const bobStream = await openStream(b, await b.token('bob'));
  t.teardown(() => bobStream.close());

  await send('First entry saved');
  await send('Second entry saved');
  await until(() => stream.events.length === 2, { what: 'two events on the other node' });
  t.same(stream.events.map((e) => [e.event, e.data.body]), [['notification', 'First entry saved'], ['notification', 'Second entry saved']], 'sent on node A, streamed by node B');
  t.equal(stream.events[0]!.id, String(stream.events[0]!.data.id), 'the event id is the notification id');
  t.equal(stream.events[0]!.data.title, 'Journal says');
  stream.close();

  await send('Third entry saved');
  await send('Fourth entry saved');
  const resumed = await openStream(b, alice, stream.events[1]!.id);
  t.teardown(() => resumed.close());
  await until(() => resumed.events.length === 2, { what: 'the missed events replayed' });
  await send('Fifth entry saved');
  await until(() => resumed.events.length === 3, { what: 'a live event after the replay' });
  t.same(resumed.events.map((e) => e.data.body), ['Third entry saved', 'Fourth entry saved', 'Fifth entry saved'], 'what the reconnect missed, then what came next, once each');
  t.equal(bobStream.events.length, 0, "another user's stream gets none of them");
  t.equal((await b.req('/v1/notifications/stream')).status, 401, 'the stream needs the ID token');

  const page = await b.req('/v1/notifications?limit=2', { headers: bearer(alice) });
  t.same(page.json.map((n: { body: string }) => n.body), ['Fifth entry saved', 'Fourth entry saved'], 'newest first');
  t.equal(page.headers['x-has-more'], 'true');
  t.match(page.headers.link, /offset=2/);
  const ids = (await b.req('/v1/notifications', { headers: bearer(alice) })).json.map((n: { id: number }) => n.id) as number[];
  t.equal(ids.length, 5);

  let res = await b.req('/v1/notifications/read', { method: 'POST', headers: bearer(alice), body: { ids: [ids[0]] } });
  t.same(res.json, { updated: 1 }, 'one marked read by id');
  res = await b.req('/v1/notifications/read', { method: 'POST', headers: bearer(alice), body: { up_to: ids[2] } });
  t.same(res.json, { updated: 3 }, 'every unread one up to an id');
  const unread = await b.req('/v1/notifications?unread=true', { headers: bearer(alice) });
  t.same(unread.json.map((n: { id: number }) => n.id), [ids[1]], 'only the one left unread');
  t.ok((await b.req('/v1/notifications', { headers: bearer(alice) })).json[0].read_at, 'read_at is set');
  res = await b.req('/v1/notifications/read', { method: 'POST', headers: bearer(await b.token('bob')), body: { up_to: ids[0] } });
  t.same(res.json, { updated: 0 }, "another user marks none of alice's");
  t.equal((await b.req('/v1/notifications/read', { method: 'POST', headers: bearer(alice), body: { ids: [1], up_to: 3 } })).status, 422, 'both ids and up_to are refused');
  t.equal((await b.req('/v1/notifications/read', { method: 'POST', headers: bearer(alice), body: {} })).status, 422, 'neither is refused');
});
