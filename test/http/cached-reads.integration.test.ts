// Cached developer reads across nodes: a write on one node is seen by the next read on any other, the memory gate and key
// revocation still apply at once, rate limits count reused answers, and reused answers skip the store.
import t from 'tap';
import { startService, type TestService } from '../helpers/service.js';
import { bearer } from '../helpers/http.js';
import { STORES } from '../helpers/stores.js';
import { waitFor } from '../helpers/until.js';

const MEMORIES = '/v1/dev/user/memories';
const ACTION_ITEMS = '/v1/dev/user/action-items';
const GOALS = '/v1/dev/user/goals';
const SCOPES = ['memories:read', 'memories:write', 'action_items:read', 'action_items:write', 'goals:read', 'goals:write'];

/** How often node `s` reused a cached answer. */
async function hits(s: TestService): Promise<number> {
  const metric = await s.service.services.registry.getSingleMetric('http_response_cache_lookups_total')!.get();
  return metric.values.find((v) => v.labels.result === 'hit')?.value ?? 0;
}

/** Counts the store queries node `s` makes from now on that read `table`. */
function storeReads(s: TestService, table: string): () => number {
  let n = 0;
  const listener = (q: { sql: string }): void => {
    if (/^select/i.test(q.sql) && new RegExp(`from [\`"]?${table}\\b`).test(q.sql)) n++;
  };
  s.service.services.store.knex.on('query', listener);
  return () => n;
}

const contents = (r: { json: { content: string }[] }): string[] => r.json.map((m) => m.content).sort();

for (const kind of STORES) {
  t.test(`a write on one node is seen by the next read on another (${kind})`, async (t) => {
    const a = await startService(t, { store: kind });
    const b = await startService(t, { sameDeploymentAs: a, clock: a.clock });
    const key = bearer(await a.devKey('alice', SCOPES));
    const memoryReads = storeReads(a, 'memories');
    const gateReads = storeReads(a, 'users');

    const first = await a.req(MEMORIES, { headers: key });
    t.same(first.json, []);
    const again = await a.req(MEMORIES, { headers: key });
    t.equal(again.status, 200);
    t.equal(again.text, first.text, 'the reused answer has the same bytes');
    t.equal(again.headers['content-type'], 'application/json');
    t.equal(Number(again.headers['x-ratelimit-remaining']), Number(first.headers['x-ratelimit-remaining']) - 1, 'and its own rate-limit headers');
    t.equal(await hits(a), 1, 'the second read reused the first answer');
    t.equal(memoryReads(), 1, 'so it did not read the memories');
    t.equal(gateReads(), 1, 'nor the memory gate');

    const created = await b.req(MEMORIES, { method: 'POST', headers: key, body: { content: 'Likes oat milk' } });
    t.equal(created.status, 200);
    t.same(contents(await a.req(MEMORIES, { headers: key })), ['Likes oat milk'], 'a create on B is seen on A');
    t.same(contents(await a.req(MEMORIES, { headers: key })), ['Likes oat milk']);

    const id = created.json.id as string;
    t.equal((await b.req(`${MEMORIES}/${id}`, { method: 'PATCH', headers: key, body: { content: 'Likes soy milk' } })).status, 200);
    t.same(contents(await a.req(MEMORIES, { headers: key })), ['Likes soy milk'], 'an update on B');
    t.equal((await b.req(`${MEMORIES}/batch`, { method: 'POST', headers: key, body: { memories: [{ content: 'Runs' }, { content: 'Reads' }] } })).status, 200);
    t.same(contents(await a.req(MEMORIES, { headers: key })), ['Likes soy milk', 'Reads', 'Runs'], 'a batch on B');
    t.equal((await b.req(`${MEMORIES}/${id}`, { method: 'DELETE', headers: key })).status, 200);
    t.same(contents(await a.req(MEMORIES, { headers: key })), ['Reads', 'Runs'], 'a delete on B');
    await b.service.services.memories.createFromConversation('alice', 'conv-1', [{ content: 'Has a dog', category: 'lifestyle' }], a.clock.now());
    t.same(contents(await a.req(MEMORIES, { headers: key })), ['Has a dog', 'Reads', 'Runs'], 'memories a conversation produced on B');
    t.same(contents(await a.req(`${MEMORIES}?limit=1&categories=lifestyle`, { headers: key })), ['Has a dog'], 'each query has its own answer');
    t.same(contents(await a.req(`${MEMORIES}?limit=1&categories=lifestyle`, { headers: key })), ['Has a dog']);

    const items = await a.req(ACTION_ITEMS, { headers: key });
    t.same(items.json, []);
    const item = await b.req(ACTION_ITEMS, { method: 'POST', headers: key, body: { description: 'Call the dentist' } });
    const listed = await a.req(ACTION_ITEMS, { headers: key });
    t.same(listed.json.map((i: { description: string }) => i.description), ['Call the dentist'], 'action items too');
    await b.req(`${ACTION_ITEMS}/${item.json.id}`, { method: 'PATCH', headers: key, body: { completed: true } });
    t.equal((await a.req(ACTION_ITEMS, { headers: key })).json[0].completed, true);

    const goal = await b.req(GOALS, { method: 'POST', headers: key, body: { title: 'Walk', goal_type: 'numeric', target_value: 10000, current_value: 0, min_value: 0, max_value: 100000, unit: 'steps' } });
    t.equal(goal.status, 200, goal.text);
    t.equal((await a.req(`${GOALS}/${goal.json.id}`, { headers: key })).json.current_value, 0);
    await b.req(`${GOALS}/${goal.json.id}/progress?current_value=2500`, { method: 'PATCH', headers: key });
    t.equal((await a.req(`${GOALS}/${goal.json.id}`, { headers: key })).json.current_value, 2500, 'goals too');
    t.equal((await a.req(GOALS, { headers: key })).json[0].current_value, 2500);

    const bob = bearer(await b.devKey('bob', SCOPES));
    t.same((await a.req(MEMORIES, { headers: bob })).json, [], "another user's answers are their own");
    t.equal(await hits(a), 3, 'the second of each pair of equal reads reused the first answer');
  });
}

t.test('the memory gate and key revocation apply at once on every node', async (t) => {
  const a = await startService(t);
  const b = await startService(t, { sameDeploymentAs: a, clock: a.clock });
  const key = bearer(await a.devKey('alice', ['memories:read']));
  t.equal((await a.req(MEMORIES, { headers: key })).status, 200);
  t.equal((await a.req(MEMORIES, { headers: key })).status, 200, 'gate and answer now remembered on A');

  await b.service.services.users.setMemoryAccess('alice', false, a.clock.now());
  const refused = await a.req(MEMORIES, { headers: key });
  t.equal(refused.status, 403, 'switched off on B: refused on A at once');
  t.equal(refused.json.detail.code, 'developer_memory_access_not_ready');
  t.equal((await a.req(MEMORIES, { headers: key })).status, 403, 'and it stays refused');
  await b.service.services.users.setMemoryAccess('alice', true, a.clock.now());
  t.equal((await a.req(MEMORIES, { headers: key })).status, 200, 'switched on again');

  const keys = await a.req('/v1/dev/keys', { headers: bearer(await a.token('alice')) });
  const revoked = await b.req(`/v1/dev/keys/${keys.json[0].id}`, { method: 'DELETE', headers: bearer(await b.token('alice')) });
  t.equal(revoked.status, 204);
  t.equal((await b.req(MEMORIES, { headers: key })).status, 401, 'revoked on B: refused on B');
  // Revocation reaches A over Redis pub/sub: wait for it.
  const status = await waitFor(async () => (await a.req(MEMORIES, { headers: key })).status, { what: 'the revocation on A', done: (st) => st === 401 });
  t.equal(status, 401, 'and on A: a remembered answer is never served to a revoked key');
});

t.test('rate limits count reused answers, on every node', async (t) => {
  const a = await startService(t, { env: { RATE_LIMIT_PER_MINUTE: '3' } });
  const b = await startService(t, { sameDeploymentAs: a, clock: a.clock });
  a.clock.set(Date.UTC(2026, 10, 23, 12, 0, 5));
  const key = bearer(await a.devKey('carol', ['memories:read']));
  const remaining = [];
  for (const s of [a, a, b]) {
    const r = await s.req(MEMORIES, { headers: key });
    t.equal(r.status, 200);
    remaining.push(r.headers['x-ratelimit-remaining']);
  }
  t.same(remaining, ['2', '1', '0']);
  t.equal(await hits(a), 1, 'the second read on A was a reused answer');
  const over = await a.req(MEMORIES, { headers: key });
  t.equal(over.status, 429, 'over the limit, whether or not an answer is cached');
  t.equal(over.headers['x-error-code'], 'ENG_ERR_RATE_LIMITED');
  t.equal((await b.req(MEMORIES, { headers: key })).status, 429);
});

t.test('only 200 answers are kept', async (t) => {
  const s = await startService(t);
  const key = bearer(await s.devKey('erin', ['memories:read', 'goals:read']));
  for (let i = 0; i < 2; i++) {
    const bad = await s.req(`${MEMORIES}?categories=bogus`, { headers: key });
    t.equal(bad.status, 400);
    t.equal(bad.headers['x-error-code'], 'ENG_ERR_CATEGORY_INVALID', 'an error keeps its own headers');
    t.equal((await s.req(`${GOALS}/goal_000000000000`, { headers: key })).status, 404);
  }
  t.equal(await hits(s), 0, 'errors are computed every time');
});

t.test('RESPONSE_CACHE_BYTES=0 keeps no answers', async (t) => {
  const s = await startService(t, { env: { RESPONSE_CACHE_BYTES: '0' } });
  const key = bearer(await s.devKey('dave', ['memories:read']));
  const reads = storeReads(s, 'memories');
  for (let i = 0; i < 3; i++) t.equal((await s.req(MEMORIES, { headers: key })).status, 200);
  t.equal(reads(), 3, 'every read went to the store');
  t.equal(await hits(s), 0);
});
