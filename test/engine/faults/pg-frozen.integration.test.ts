// PostgreSQL stops answering on the service's connections (their backends frozen with SIGSTOP, as a hung server or a
// network path that drops packets looks): a request caught on one is refused with 503 once its query times out
// instead of waiting for ever, the pool then replaces those connections so requests and live writes succeed again
// while the old ones are still frozen, and nothing a session sent is lost.
import t from 'tap';
import { randomUUID } from 'node:crypto';
import knexFactory from 'knex';
import { startService } from '../../helpers/service.js';
import { PG_URL, storeEnv } from '../../helpers/stores.js';
import { advance, open, sendText, suggestedLine } from '../../helpers/listen.js';
import { bearer } from '../../helpers/http.js';
import { until } from '../../helpers/until.js';

t.test('frozen backends: a request refused after the query timeout, then served on new connections', async (t) => {
  // The service's connections carry a name of their own, so only their backends are frozen (other tests share the server).
  const app = `frozen-${randomUUID().slice(0, 8)}`;
  const env = storeEnv(t, 'pg');
  const ts = await startService(t, { env: { ...env, DATABASE_URL: `${PG_URL}?application_name=${app}`, DATABASE_QUERY_TIMEOUT_MS: '1000', RESPONSE_CACHE_BYTES: '0' } });
  const admin = knexFactory({ client: 'pg', connection: PG_URL, pool: { min: 0, max: 1 } });
  t.teardown(() => admin.destroy());
  const frozen: number[] = [];
  const thaw = (): void => {
    for (const pid of frozen.splice(0)) {
      try {
        process.kill(pid, 'SIGCONT');
      } catch {
        // gone already
      }
    }
  };
  t.teardown(thaw);

  const key = await ts.devKey('u1');
  const memories = () => ts.req('/v1/dev/user/memories', { headers: bearer(key) });
  t.equal((await memories()).status, 200);
  const c = await open(ts, { uid: 'u2', custom_stt: 'enabled' });
  await c.ready();
  const actor = ts.service.sessions.sessionsOf('u2')[0]!;
  await sendText(c, actor, suggestedLine('Before the freeze.', 0));
  await advance(ts, 600);
  await until(async () => (actor.conversationId ? (await ts.service.services.conversations.segments(actor.conversationId)).length === 1 : false), { what: 'the first line stored' });

  const pids = (await admin.raw('select pid from pg_stat_activity where application_name = ?', [app])).rows.map((r: { pid: number }) => r.pid);
  t.ok(pids.length > 0, `the service holds ${pids.length} connections`);
  for (const pid of pids) {
    process.kill(pid, 'SIGSTOP');
    frozen.push(pid);
  }

  // Each idle connection is now a frozen one: the first request to take one waits out the query timeout.
  const refused = await memories();
  t.equal(refused.status, 503, 'a request caught on a frozen connection is refused, not held');
  t.equal(refused.headers['x-error-code'], 'ENG_ERR_DEPENDENCY_UNAVAILABLE');
  t.same(refused.json, { detail: 'Service temporarily unavailable: the store is unreachable' });
  // A line sent meanwhile: its step's write may be caught too, and goes again at the next step.
  await sendText(c, actor, suggestedLine('During the freeze.', 2));
  await until(async () => {
    await advance(ts, 600);
    return (await memories()).status === 200;
  }, { what: 'requests served on new connections while the old ones are frozen', timeoutMs: 60_000, everyMs: 50 });
  await until(async () => {
    await advance(ts, 600);
    return (await ts.service.services.conversations.segments(actor.conversationId!)).map((s) => s.text).join(' ') === 'Before the freeze. During the freeze.';
  }, { what: 'the line sent during the freeze stored', timeoutMs: 60_000, everyMs: 50 });
  t.ok(frozen.every((pid) => { try { process.kill(pid, 0); return true; } catch { return false; } }), 'the frozen backends were still there all along');
  t.equal(c.ws.readyState, c.ws.OPEN, 'the session stayed open');

  thaw();
  t.equal((await memories()).status, 200, 'and after they answer again');
  c.close();
  await c.closed;
});
