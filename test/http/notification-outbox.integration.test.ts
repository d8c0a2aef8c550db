// The notification outbox over real sockets, on sqlite and PostgreSQL: pages newest first, read marks, and the
// server-sent event stream on another node than the sender, resumed with Last-Event-ID.
import t from 'tap';
import { startService } from '../helpers/service.js';
import { bearer } from '../helpers/http.js';
import { STORES } from '../helpers/stores.js';
import { until } from '../helpers/until.js';
import { createApp, direct, install, openStream } from '../helpers/notifications.js';
import { ManualClock } from '../../engine/clock.js';

/** 10:15 UTC. */
const AT = Date.UTC(2026, 11, 2, 10, 15, 0);

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
