// Refusals carry the headers a client expects: X-RateLimit-* on 401 and 403 under /v1/dev, Allow on 405.
import t from 'tap';
import { startService } from '../helpers/service.js';
import { bearer } from '../helpers/http.js';

const MIDNIGHT = Date.UTC(2026, 10, 23, 0, 0, 0);

t.test('401 and 403 answers carry the rate-limit headers', async (t) => {
  const s = await startService(t, { env: { RATE_LIMIT_PER_MINUTE: '3', RATE_LIMIT_PER_DAY: '100' } });
  s.clock.set(MIDNIGHT + 10_000);
  const readOnly = await s.devKey('erin', ['action_items:read']);

  const noScope = await s.req('/v1/dev/user/goals', { headers: bearer(readOnly) });
  t.equal(noScope.status, 403);
  t.equal(noScope.headers['x-ratelimit-limit'], '3');
  t.equal(noScope.headers['x-ratelimit-remaining'], '2', 'a refused scope counts against the key');
  t.equal(noScope.headers['x-ratelimit-reset'], String((MIDNIGHT + 60_000) / 1000));
  const allowed = await s.req('/v1/dev/user/action-items', { headers: bearer(readOnly) });
  t.equal(allowed.headers['x-ratelimit-remaining'], '1', 'the same window as the key\'s other calls');

  const missing = await s.req('/v1/dev/user/memories');
  t.equal(missing.status, 401);
  t.equal(missing.headers['x-ratelimit-limit'], '3');
  t.equal(missing.headers['x-ratelimit-remaining'], '2', 'no credential: counted against the caller\'s address');
  const unknownKey = await s.req('/v1/dev/user/memories', { headers: bearer('svc_dev_0123456789abcdef0123456789abcdef') });
  t.equal(unknownKey.status, 401);
  t.equal(unknownKey.headers['x-ratelimit-remaining'], '1');
  const badToken = await s.req('/v1/dev/keys', { headers: bearer('not-a-token') });
  t.equal(badToken.status, 401, 'the ID-token routes too');
  t.equal(badToken.headers['x-ratelimit-remaining'], '0');
  const guessing = await s.req('/v1/dev/user/memories', { headers: bearer('svc_dev_0123456789abcdef0123456789abcdee') });
  t.equal(guessing.status, 429, 'guessing keys from one address is bounded too');
  t.ok(guessing.headers['retry-after']);

  t.equal((await s.req('/v1/dev/user/action-items', { headers: bearer(readOnly) })).status, 200, 'the key\'s own window is apart from the address\'s');
  const outside = await s.req('/v1/folders');
  t.equal(outside.status, 401);
  t.equal(outside.headers['x-ratelimit-limit'], undefined, 'routes outside /v1/dev are not rate limited');
});

t.test('405 names the allowed methods', async (t) => {
  const s = await startService(t);
  const put = await s.req('/v1/dev/user/memories', { method: 'PUT', body: {} });
  t.equal(put.status, 405);
  t.equal(put.headers.allow, 'GET, POST');
  const one = await s.req('/v1/dev/user/goals/goal_0123456789ab/history', { method: 'DELETE' });
  t.equal(one.status, 405);
  t.equal(one.headers.allow, 'GET');
  const many = await s.req('/v1/dev/user/goals/goal_0123456789ab', { method: 'POST', body: {} });
  t.equal(many.headers.allow, 'GET, PATCH, DELETE');
  const unknown = await s.req('/v1/nowhere', { method: 'PUT' });
  t.equal(unknown.status, 404);
  t.equal(unknown.headers.allow, undefined);
});
