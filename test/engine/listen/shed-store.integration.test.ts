// A node whose store falls behind its sessions' transcript writes refuses new sessions (1013) and keeps the ones it
// has; once the writes are committed it takes sessions again, and nothing written meanwhile is lost
// (LISTEN_SHED_STORE_DELAY_MS). The store is held back for real: another connection holds sqlite's write lock.
import t from 'tap';
import { startService } from '../../helpers/service.js';
import { bearer } from '../../helpers/http.js';
import { advance, open, sendText, suggestedLine } from '../../helpers/listen.js';
import { until } from '../../helpers/until.js';
import { sqliteWriteLock } from '../../helpers/sqlite-lock.js';

t.test('refused with 1013 while transcript writes wait on the store; taken again once they are committed', async (t) => {
  const ts = await startService(t, { env: { LISTEN_SHED_STORE_DELAY_MS: '2000' } });
  const backlog = async () => Number(/^store_transcript_write_backlog_seconds (\S+)/m.exec((await ts.req('/metrics')).text)?.[1]);
  const shed = async () => Number(/^listen_sessions_shed_total (\d+)/m.exec((await ts.req('/metrics')).text)?.[1]);

  const live = await open(ts, { uid: 'u1', custom_stt: 'enabled' });
  await live.ready();
  const actor = ts.service.sessions.sessionsOf('u1')[0]!;
  const say = async (text: string, start: number): Promise<void> => {
    await sendText(live, actor, suggestedLine(text, start));
    await advance(ts, 600);
  };
  await say('Before the store falls behind.', 0);
  await until(() => actor.conversationId !== undefined, { timeoutMs: 20_000, what: 'the conversation' });
  const id = actor.conversationId!;
  t.equal(await backlog(), 0, 'no write waiting');

  const lock = sqliteWriteLock(t, ts.dataDir);
  await lock.hold();
  // The next step's write waits on sqlite's lock (its busy timeout is 5 s of real time, so the test lets go within
  // that); the step is not awaited, as the scheduler awaits the write. The service's clock moves on meanwhile.
  await sendText(live, actor, suggestedLine('Written while the store is held.', 2));
  ts.clock.advance(600);
  const step = ts.service.scheduler.tick();
  await until(async () => (ts.clock.advance(100), (await backlog()) > 0), { timeoutMs: 20_000, what: 'the write submitted' });
  ts.clock.advance(2500);
  t.ok((await backlog()) >= 2.5, 'the oldest transcript write has waited 2.5 s of the service clock');
  const refused = await open(ts, { uid: 'u2', custom_stt: 'enabled' });
  t.same(await refused.closed, { code: 1013, reason: 'server busy, try again later' }, 'a new session is refused with 1013');
  t.equal(await shed(), 1, 'and counted in listen_sessions_shed_total');
  t.equal(live.ws.readyState, live.ws.OPEN, 'the live session is still open');

  await lock.release();
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
  await sendText(live, actor, suggestedLine('One.', 0));
  await advance(ts, 600);
  await until(() => actor.conversationId !== undefined, { timeoutMs: 20_000, what: 'the conversation' });
  const lock = sqliteWriteLock(t, ts.dataDir);
  await lock.hold();
  await sendText(live, actor, suggestedLine('Two.', 2));
  ts.clock.advance(600);
  const step = ts.service.scheduler.tick();
  const backlog = async () => Number(/^store_transcript_write_backlog_seconds (\S+)/m.exec((await ts.req('/metrics')).text)?.[1]);
  await until(async () => (ts.clock.advance(100), (await backlog()) > 0), { timeoutMs: 20_000, what: 'the write submitted' });
  ts.clock.advance(2500);
  t.ok((await backlog()) >= 2.5, 'the store is as far behind');
  const other = await open(ts, { uid: 'u2', custom_stt: 'enabled' });
  await lock.release();
  await step;
  await other.ready();
  t.pass('taken although the store was behind');
  other.close();
  live.close();
  await live.closed;
});
