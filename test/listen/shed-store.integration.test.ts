// A node whose store falls behind its sessions' transcript writes refuses new sessions (1013) and keeps the ones it
// has; once the writes are committed it takes sessions again, and nothing written meanwhile is lost
// (LISTEN_SHED_STORE_DELAY_MS). The store is held back for real: another connection holds sqlite's write lock.
import t from 'tap';
import path from 'node:path';
import sqlite3 from 'sqlite3';
import { startService } from '../helpers/service.js';
import { bearer } from '../helpers/http.js';
import { advance, open, until } from '../helpers/listen.js';

const suggested = (text: string, start: number): string =>
  JSON.stringify({ type: 'suggested_transcript', stt_provider: 'app', segments: [{ text, speaker: 'SPEAKER_00', speaker_id: 0, is_user: true, person_id: null, start, end: start + 1 }] });

/** Runs one statement on a connection of the test's own. */
const exec = (db: sqlite3.Database, sql: string): Promise<void> => new Promise((resolve, reject) => db.exec(sql, (err) => (err ? reject(err) : resolve())));

t.test('refused with 1013 while transcript writes wait on the store; taken again once they are committed', async (t) => {
  const ts = await startService(t, { env: { LISTEN_SHED_STORE_DELAY_MS: '2000' } });
  const backlog = async () => Number(/^store_transcript_write_backlog_seconds (\S+)/m.exec((await ts.req('/metrics')).text)?.[1]);
  const shed = async () => Number(/^listen_sessions_shed_total (\d+)/m.exec((await ts.req('/metrics')).text)?.[1]);

  const live = await open(ts, { uid: 'u1', custom_stt: 'enabled' });
  await live.ready();
  const actor = ts.service.sessions.sessionsOf('u1')[0]!;
  const say = async (text: string, start: number): Promise<void> => {
    const before = actor.stats.textMessages;
    live.ws.send(suggested(text, start));
    await until(() => actor.stats.textMessages > before, 5000, 'frame received');
    await advance(ts, 600);
  };
  await say('Before the store falls behind.', 0);
  await until(() => actor.conversationId !== undefined, 5000, 'the conversation');
  const id = actor.conversationId!;
  t.equal(await backlog(), 0, 'no write waiting');

  const lock = new sqlite3.Database(path.join(ts.dataDir, 'service.sqlite'));
  t.teardown(() => new Promise<void>((r) => lock.close(() => r())));
  await exec(lock, 'BEGIN EXCLUSIVE');
  // The next step's write waits on sqlite's lock (its busy timeout is 5 s of real time, so the test lets go within
  // that); the step is not awaited, as the scheduler awaits the write. The service's clock moves on meanwhile.
  const before = actor.stats.textMessages;
  live.ws.send(suggested('Written while the store is held.', 2));
  await until(() => actor.stats.textMessages > before, 5000, 'frame received');
  ts.clock.advance(600);
  const step = ts.service.scheduler.tick();
  await until(async () => (ts.clock.advance(100), (await backlog()) > 0), 4000, 'the write submitted');
  ts.clock.advance(2500);
  t.ok((await backlog()) >= 2.5, 'the oldest transcript write has waited 2.5 s of the service clock');
  const refused = await open(ts, { uid: 'u2', custom_stt: 'enabled' });
  t.same(await refused.closed, { code: 1013, reason: 'server busy, try again later' }, 'a new session is refused with 1013');
  t.equal(await shed(), 1, 'and counted in listen_sessions_shed_total');
  t.equal(live.ws.readyState, live.ws.OPEN, 'the live session is still open');

  await exec(lock, 'COMMIT');
  await step;
  t.equal(await backlog(), 0, 'the write committed');
  const after = await open(ts, { uid: 'u3', custom_stt: 'enabled' });
  await after.ready();
  t.pass('taken again once the store caught up');
  after.close();

  const res = await ts.req(`/v1/dev/user/conversations/${id}?include_transcript=true`, { headers: bearer(await ts.token('u1')) });
  // One speaker's adjacent lines are merged into one segment.
  t.same(res.json.transcript_segments.map((s: { text: string }) => s.text).join(' '), 'Before the store falls behind. Written while the store is held.', 'nothing written meanwhile was lost');
  live.close();
  await live.closed;
});

t.test('LISTEN_SHED_STORE_DELAY_MS=0: never refused for the store', async (t) => {
  const ts = await startService(t, { env: { LISTEN_SHED_STORE_DELAY_MS: '0' } });
  const live = await open(ts, { uid: 'u1', custom_stt: 'enabled' });
  await live.ready();
  const actor = ts.service.sessions.sessionsOf('u1')[0]!;
  live.ws.send(suggested('One.', 0));
  await until(() => actor.stats.textMessages > 0, 5000, 'frame received');
  await advance(ts, 600);
  await until(() => actor.conversationId !== undefined, 5000, 'the conversation');
  const lock = new sqlite3.Database(path.join(ts.dataDir, 'service.sqlite'));
  t.teardown(() => new Promise<void>((r) => lock.close(() => r())));
  await exec(lock, 'BEGIN EXCLUSIVE');
  live.ws.send(suggested('Two.', 2));
  await until(() => actor.stats.textMessages > 1, 5000, 'frame received');
  ts.clock.advance(600);
  const step = ts.service.scheduler.tick();
  const backlog = async () => Number(/^store_transcript_write_backlog_seconds (\S+)/m.exec((await ts.req('/metrics')).text)?.[1]);
  await until(async () => (ts.clock.advance(100), (await backlog()) > 0), 4000, 'the write submitted');
  ts.clock.advance(2500);
  t.ok((await backlog()) >= 2.5, 'the store is as far behind');
  const other = await open(ts, { uid: 'u2', custom_stt: 'enabled' });
  await exec(lock, 'COMMIT');
  await step;
  await other.ready();
  t.pass('taken although the store was behind');
  other.close();
  live.close();
  await live.closed;
});
