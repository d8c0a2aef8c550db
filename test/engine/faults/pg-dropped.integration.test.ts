// PostgreSQL drops the service's connections (pg_terminate_backend from an admin connection) while sessions stream:
// a write caught on a dropped connection fails visibly (listen_transcript_write_failures_total) and its segments wait
// for the next 600 ms step on a new connection; nothing is lost, no session closes, the process stays up.
import t from 'tap';
import { randomUUID } from 'node:crypto';
import knexFactory from 'knex';
import { startService, type TestService } from '../../helpers/service.js';
import { PG_URL, storeEnv } from '../../helpers/stores.js';
import { advance, open, sendText, suggestedLine } from '../../helpers/listen.js';
import { until } from '../../helpers/until.js';

const counter = async (ts: TestService, name: string): Promise<number> => Number(new RegExp(`^${name} (\\S+)`, 'm').exec((await ts.req('/metrics')).text)?.[1]);

t.test('connections terminated under live writes: failed steps are retried, every line stored once', async (t) => {
  // The service's connections carry a name of their own, so only they are terminated (other tests share the server).
  const app = `faults-${randomUUID().slice(0, 8)}`;
  const env = storeEnv(t, 'pg');
  const ts = await startService(t, { env: { ...env, DATABASE_URL: `${PG_URL}?application_name=${app}` } });
  const admin = knexFactory({ client: 'pg', connection: PG_URL, pool: { min: 0, max: 1 } });
  t.teardown(() => admin.destroy());
  const terminate = async (): Promise<number> => {
    const r = await admin.raw('select count(*) filter (where pg_terminate_backend(pid)) as n from pg_stat_activity where application_name = ?', [app]);
    return Number(r.rows[0].n);
  };

  const users = ['u1', 'u2', 'u3'];
  const sessions = await Promise.all(users.map(async (uid) => {
    const c = await open(ts, { uid, custom_stt: 'enabled' });
    await c.ready();
    return { uid, c, actor: ts.service.sessions.sessionsOf(uid)[0]! };
  }));
  const lines = (uid: string, n: number) => Array.from({ length: n }, (_, i) => `Line ${i} of ${uid}.`);
  const rounds = 8;
  let killed = 0;
  for (let i = 0; i < rounds; i++) {
    for (const s of sessions) await sendText(s.c, s.actor, suggestedLine(`Line ${i} of ${s.uid}.`, i * 2));
    // Every other round the connections are cut while the step writes; the rest they are cut between steps.
    if (i % 2 === 0) {
      const [n] = await Promise.all([terminate(), advance(ts, 600)]);
      killed += n;
    } else {
      killed += await terminate();
      await advance(ts, 600);
    }
  }
  t.ok(killed > 0, `the service's connections were terminated (${killed})`);
  const failures = await counter(ts, 'listen_transcript_write_failures_total');
  t.comment(`steps whose write failed: ${failures}`);

  const restoredAt = Date.now();
  const stored = async (uid: string) => {
    const actor = sessions.find((s) => s.uid === uid)!.actor;
    const segs = actor.conversationId ? await ts.service.services.conversations.segments(actor.conversationId) : [];
    return segs.map((s) => s.text).join(' ');
  };
  await until(async () => {
    await advance(ts, 600);
    const all = await Promise.all(users.map(async (u) => (await stored(u)) === lines(u, rounds).join(' ')));
    return all.every(Boolean);
  }, { what: 'every line stored', timeoutMs: 30_000, everyMs: 50 });
  t.comment(`every line stored ${Date.now() - restoredAt} ms after the last termination`);
  for (const u of users) t.equal(await stored(u), lines(u, rounds).join(' '), `${u}: every line stored, once`);
  t.equal(await counter(ts, 'listen_transcript_items_lost_total'), 0, 'nothing given up');
  for (const s of sessions) t.equal(s.c.ws.readyState, s.c.ws.OPEN, `${s.uid}: the session stayed open`);
  const health = await ts.req('/health');
  t.equal(health.status, 200, 'the store answers again on new connections');

  // A session closing right after a termination still gets its last line in.
  const last = sessions[0]!;
  await sendText(last.c, last.actor, suggestedLine('Said while leaving.', 40));
  await terminate();
  last.c.close();
  await last.c.closed;
  await until(async () => {
    await advance(ts, 500);
    return last.actor.state === 'closed';
  }, { what: 'the session closed', timeoutMs: 30_000, everyMs: 50 });
  t.match(await stored(last.uid), /Said while leaving\.$/, 'the last line reached the store');
  t.equal(await counter(ts, 'listen_transcript_items_lost_total'), 0, 'nothing given up');
  for (const s of sessions.slice(1)) {
    s.c.close();
    await s.c.closed;
  }
});
