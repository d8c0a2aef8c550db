// Developer REST rate limits in Redis, driven by the injected clock: headers on every answer, 429 with Retry-After, fail closed.
import t from 'tap';
import { startService } from '../helpers/service.js';
import { freePort, portAnswers, startRedisServer } from '../helpers/ports.js';
import { bearer } from '../helpers/http.js';
import { until } from '../helpers/until.js';
import type { AppRoute } from '../../http/routes/types.js';

const probe = (): AppRoute[] => [
  { method: 'get', path: '/v1/dev/user/probe', operationId: 'probe', summary: 'probe', auth: { kind: 'api_key', scope: 'memories:read' }, handler: () => ({ body: { ok: true } }) },
  { method: 'get', path: '/v1/elsewhere', operationId: 'elsewhere', summary: 'not rate limited', auth: { kind: 'api_key', scope: 'memories:read' }, handler: () => ({ body: { ok: true } }) },
];

// A UTC midnight, so minute and day windows start together.
const MIDNIGHT = Date.UTC(2026, 10, 23, 0, 0, 0);

t.test('per key per minute and per user per day', async (t) => {
  const s = await startService(t, { extraRoutes: probe, env: { RATE_LIMIT_PER_MINUTE: '3', RATE_LIMIT_PER_DAY: '8' } });
  s.clock.set(MIDNIGHT + 10_000);
  const k1 = await s.devKey('alice');
  const k2 = await s.devKey('alice');
  const other = await s.devKey('bob');

  const r1 = await s.req('/v1/dev/user/probe', { headers: bearer(k1) });
  t.equal(r1.status, 200);
  t.equal(r1.headers['x-ratelimit-limit'], '3', 'the minute window is the tighter one');
  t.equal(r1.headers['x-ratelimit-remaining'], '2');
  t.equal(r1.headers['x-ratelimit-reset'], String((MIDNIGHT + 60_000) / 1000), 'reset is a Unix time');
  await s.req('/v1/dev/user/probe', { headers: bearer(k1) });
  const r3 = await s.req('/v1/dev/user/probe', { headers: bearer(k1) });
  t.equal(r3.headers['x-ratelimit-remaining'], '0');
  const r4 = await s.req('/v1/dev/user/probe', { headers: bearer(k1) });
  t.equal(r4.status, 429);
  t.equal(r4.headers['x-error-code'], 'ENG_ERR_RATE_LIMITED');
  t.equal(r4.headers['retry-after'], '50');
  t.equal(r4.json.detail, 'Rate limit exceeded. Try again in 50s.');

  // Alice's day so far: 2 key creations (the key routes count too) + 4 probes = 6 of 8.
  const r5 = await s.req('/v1/dev/user/probe', { headers: bearer(k2) });
  t.equal(r5.status, 200, "alice's other key has its own minute");
  t.equal(r5.headers['x-ratelimit-limit'], '8', 'now the day is the tighter window');
  t.equal(r5.headers['x-ratelimit-remaining'], '1');
  t.equal((await s.req('/v1/dev/user/probe', { headers: bearer(k2) })).headers['x-ratelimit-remaining'], '0');
  const r7 = await s.req('/v1/dev/user/probe', { headers: bearer(k2) });
  t.equal(r7.status, 429, 'the day is spent for every key of the user');
  t.equal(r7.headers['x-ratelimit-limit'], '8');
  t.equal(r7.headers['retry-after'], String(86_400 - 10));

  const b = await s.req('/v1/dev/user/probe', { headers: bearer(other) });
  t.equal(b.status, 200, 'another user is not affected');

  s.clock.advance(60_000);
  const nextMinute = await s.req('/v1/dev/user/probe', { headers: bearer(k1) });
  t.equal(nextMinute.status, 429, 'the day limit still holds in the next minute');
  t.equal(nextMinute.headers['x-ratelimit-reset'], String((MIDNIGHT + 86_400_000) / 1000));

  s.clock.set(MIDNIGHT + 86_400_000 + 1000);
  const tomorrow = await s.req('/v1/dev/user/probe', { headers: bearer(k1) });
  t.equal(tomorrow.status, 200, 'a new UTC day starts afresh');

  const outside = await s.req('/v1/elsewhere', { headers: bearer(k1) });
  t.equal(outside.headers['x-ratelimit-limit'], undefined, 'only /v1/dev/* is rate limited');
  const unauth = await s.req('/v1/dev/user/probe');
  t.equal(unauth.status, 401);
});

t.test('the limits are shared by every node', async (t) => {
  const a = await startService(t, { extraRoutes: probe, env: { RATE_LIMIT_PER_MINUTE: '2', RATE_LIMIT_PER_DAY: '100' } });
  const b = await startService(t, { sameDeploymentAs: a, extraRoutes: probe, clock: a.clock });
  a.clock.set(MIDNIGHT + 5_000);
  const key = await a.devKey('carol');
  t.equal((await a.req('/v1/dev/user/probe', { headers: bearer(key) })).status, 200);
  t.equal((await b.req('/v1/dev/user/probe', { headers: bearer(key) })).status, 200);
  t.equal((await a.req('/v1/dev/user/probe', { headers: bearer(key) })).status, 429);
  t.equal((await b.req('/v1/dev/user/probe', { headers: bearer(key) })).status, 429);
});

t.test('without Redis, API-key traffic fails closed with 503', async (t) => {
  const port = await freePort();
  const redis = startRedisServer(port);
  const exited = new Promise((r) => redis.once('exit', r));
  t.teardown(() => {
    if (redis.exitCode === null) redis.kill('SIGKILL');
  });
  await until(() => portAnswers(port), { what: 'redis up' });
  const s = await startService(t, { extraRoutes: probe, env: { REDIS_URL: `redis://127.0.0.1:${port}` } });
  const key = await s.devKey('dave');
  t.equal((await s.req('/v1/dev/user/probe', { headers: bearer(key) })).status, 200);
  redis.kill('SIGKILL');
  await exited;
  const res = await s.req('/v1/dev/user/probe', { headers: bearer(key) });
  t.equal(res.status, 503);
  t.equal(res.headers['x-error-code'], 'ENG_ERR_DEPENDENCY_UNAVAILABLE');
  const health = await s.req('/health');
  t.equal(health.status, 503, '/health says so too');
  t.equal(health.json.checks.redis, 'unavailable');
  t.equal(health.json.checks.store, 'ok');
});
