// The data-version protocol against a real Redis and the real service: a write that has committed but not yet been
// announced (in flight, or its announcement lost) is never hidden by a cached answer, and a write is refused without Redis.
import t from 'tap';
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { DataVersions } from '../../../engine/cache/data-versions.js';
import { createLogger } from '../../../engine/logger.js';
import { isEngineError } from '../../../engine/errors.js';
import { startService, type TestService } from '../../helpers/service.js';
import { bearer } from '../../helpers/http.js';
import { freePort } from '../../helpers/ports.js';

const MEMORIES = '/v1/dev/user/memories';
const logger = createLogger('silent');

/** Inserts a memory behind every cache's back, as a write whose announcement has not landed would have. */
async function insertDirectly(s: TestService, uid: string, content: string): Promise<void> {
  const at = new Date(s.clock.now()).toISOString();
  await s.service.services.store.knex('memories').insert({
    id: randomUUID(), user_id: uid, content, category: 'other', visibility: 'private', tags: '[]', manually_added: true, conversation_id: null, created_at: at, updated_at: at,
  });
}

async function lookups(s: TestService, result: string): Promise<number> {
  const metric = await s.service.services.registry.getSingleMetric('http_response_cache_lookups_total')!.get();
  return metric.values.find((v) => v.labels.result === result)?.value ?? 0;
}

t.test('while a write is in flight, reads go to the store; once it ends, answers are reused again', async (t) => {
  const s = await startService(t);
  const key = bearer(await s.devKey('alice', ['memories:read']));
  const versions = new DataVersions({ redis: s.service.services.redis, prefix: s.env.REDIS_PREFIX!, logger });
  t.same((await s.req(MEMORIES, { headers: key })).json, []);
  t.same((await s.req(MEMORIES, { headers: key })).json, []);
  t.equal(await lookups(s, 'hit'), 1);

  let release!: () => void;
  let counted!: () => void;
  /** Resolves once the write has counted itself in and committed. */
  const countedIn = new Promise<void>((r) => (counted = r));
  const writing = versions.write('alice', async () => {
    await insertDirectly(s, 'alice', 'Committed, not yet announced');
    counted();
    await new Promise<void>((r) => (release = r));
  });
  await countedIn;
  const during = await s.req(MEMORIES, { headers: key });
  t.same(during.json.map((m: { content: string }) => m.content), ['Committed, not yet announced'], 'the cached answer is not trusted during the write');
  t.equal(await lookups(s, 'bypass'), 1);
  release();
  await writing;
  t.same((await s.req(MEMORIES, { headers: key })).json.length, 1);
  t.same((await s.req(MEMORIES, { headers: key })).json.length, 1);
  t.equal(await lookups(s, 'hit'), 2, 'reused again after the write ended');
});

t.test('a write whose end is never announced disables reuse until its version expires, then a new version starts', async (t) => {
  const s = await startService(t);
  const key = bearer(await s.devKey('bob', ['memories:read']));
  const redis = s.service.services.redis;
  const versionKey = `${s.env.REDIS_PREFIX}:dv:{bob}`;
  await s.req(MEMORIES, { headers: key });
  await s.req(MEMORIES, { headers: key });
  t.equal(await lookups(s, 'hit'), 1);

  // A writer counted itself in, committed, and died before counting itself out.
  await redis.hincrby(versionKey, 'w', 1);
  await insertDirectly(s, 'bob', 'Written by a node that died');
  for (let i = 0; i < 3; i++) t.equal((await s.req(MEMORIES, { headers: key })).json.length, 1, `read ${i + 1} sees the write`);
  t.equal(await lookups(s, 'hit'), 1, 'nothing reused meanwhile');

  // The version hash expires (as after VERSION_TTL_MS), or Redis loses its data: a fresh token, never an old one.
  await redis.del(versionKey);
  t.equal((await s.req(MEMORIES, { headers: key })).json.length, 1);
  t.equal((await s.req(MEMORIES, { headers: key })).json.length, 1);
  t.equal(await lookups(s, 'hit'), 2, 'reused again under the new version');
});

t.test('without Redis a write is refused before it touches the store', async (t) => {
  // A port where nothing listens: every command fails.
  const port = await freePort();
  const redis = new Redis(`redis://127.0.0.1:${port}`, { maxRetriesPerRequest: 0, retryStrategy: () => null, lazyConnect: true });
  redis.on('error', () => undefined);
  t.teardown(() => redis.disconnect());
  const versions = new DataVersions({ redis, prefix: `test-${randomUUID()}`, logger, timeoutMs: 200 });
  let ran = false;
  const err = await versions.write('carol', async () => (ran = true)).catch((e: unknown) => e);
  t.ok(isEngineError(err) && err.code === 'ENG_ERR_DEPENDENCY_UNAVAILABLE', 'refused with 503');
  t.notOk(ran, 'the write did not run');
});
