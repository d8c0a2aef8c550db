// Memories over real sockets on sqlite and PostgreSQL: CRUD, batch all-or-nothing, filters, pagination, scopes and the readiness gate.
import t from 'tap';
import { startService, type TestService } from '../helpers/service.js';
import { bearer } from '../helpers/http.js';
import { STORES } from '../helpers/stores.js';

const BASE = '/v1/dev/user/memories';

async function rows(s: TestService, uid?: string): Promise<Record<string, any>[]> {
  const q = s.service.services.store.knex('memories').select('*');
  if (uid) q.where({ user_id: uid });
  return q;
}

for (const store of STORES) {
  t.test(`memories on ${store}`, async (t) => {
    const s = await startService(t, { store });
    const rw = bearer(await s.devKey('alice', ['memories:read', 'memories:write']));
    const ro = bearer(await s.devKey('alice', ['memories:read']));
    const bob = bearer(await s.devKey('bob', ['memories:read', 'memories:write']));

    let firstId = '';
    await t.test('create with defaults, then list', async (t) => {
      const res = await s.req(BASE, { method: 'POST', headers: rw, body: { content: 'Likes green tea' } });
      t.equal(res.status, 200);
      t.match(res.json, { id: String, content: 'Likes green tea', category: 'other', visibility: 'private', tags: [], manually_added: true });
      t.equal(res.json.created_at, new Date(s.clock.now()).toISOString(), 'time comes from the injected clock');
      t.equal(res.json.updated_at, res.json.created_at);
      firstId = res.json.id;
      const stored = await rows(s, 'alice');
      t.equal(stored.length, 1);
      t.match(stored[0], { id: firstId, content: 'Likes green tea', category: 'other', visibility: 'private', tags: '[]', conversation_id: null });

      s.clock.advance(1000);
      const full = await s.req(BASE, { method: 'POST', headers: rw, body: { content: 'Works as a nurse', category: 'work', visibility: 'public', tags: ['job', 'health'] } });
      t.equal(full.status, 200);
      t.match(full.json, { category: 'work', visibility: 'public', tags: ['job', 'health'] });

      const list = await s.req(BASE, { headers: ro });
      t.equal(list.status, 200);
      t.same(list.json.map((m: { content: string }) => m.content), ['Works as a nurse', 'Likes green tea'], 'newest first');
      t.same(Object.keys(list.json[0]).sort(), ['category', 'content', 'created_at', 'id', 'manually_added', 'tags', 'updated_at', 'visibility']);
      t.same((await s.req(BASE, { headers: bob })).json, [], 'per user');
    });

    await t.test('bounds and bad input write nothing', async (t) => {
      const before = (await rows(s)).length;
      const long = await s.req(BASE, { method: 'POST', headers: rw, body: { content: 'x'.repeat(501) } });
      t.equal(long.status, 422);
      t.match(long.json.detail[0], { loc: ['body', 'content'], type: 'string_too_long' });
      const ok500 = await s.req(BASE, { method: 'POST', headers: rw, body: { content: 'y'.repeat(500) } });
      t.equal(ok500.status, 200, '500 characters is allowed');
      await s.req(`${BASE}/${ok500.json.id}`, { method: 'DELETE', headers: rw });
      const empty = await s.req(BASE, { method: 'POST', headers: rw, body: { content: '' } });
      t.equal(empty.status, 422);
      t.match(empty.json.detail[0], { loc: ['body', 'content'], type: 'string_too_short' });
      const missing = await s.req(BASE, { method: 'POST', headers: rw, body: {} });
      t.match(missing.json.detail[0], { loc: ['body', 'content'], type: 'missing' });
      const badCat = await s.req(BASE, { method: 'POST', headers: rw, body: { content: 'a', category: 'interesting' } });
      t.equal(badCat.status, 422);
      const badVis = await s.req(BASE, { method: 'POST', headers: rw, body: { content: 'a', visibility: 'shared' } });
      t.equal(badVis.status, 422);
      const badTags = await s.req(BASE, { method: 'POST', headers: rw, body: { content: 'a', tags: 'x' } });
      t.equal(badTags.status, 422);
      t.equal((await rows(s)).length, before);
    });

    await t.test('batch: all or nothing, at most 25', async (t) => {
      const before = await rows(s);
      const tooMany = await s.req(`${BASE}/batch`, { method: 'POST', headers: rw, body: { memories: Array.from({ length: 26 }, (_, i) => ({ content: `m${i}` })) } });
      t.equal(tooMany.status, 422);
      t.match(tooMany.json.detail[0], { loc: ['body', 'memories'], type: 'too_long' });
      const oneBad = await s.req(`${BASE}/batch`, { method: 'POST', headers: rw, body: { memories: [{ content: 'fine' }, { content: 'z'.repeat(501) }] } });
      t.equal(oneBad.status, 422);
      t.match(oneBad.json.detail[0], { loc: ['body', 'memories', 1, 'content'] });
      t.equal((await rows(s)).length, before.length, 'nothing written');

      const empty = await s.req(`${BASE}/batch`, { method: 'POST', headers: rw, body: { memories: [] } });
      t.equal(empty.status, 200);
      t.same(empty.json, { memories: [], created_count: 0 });

      s.clock.advance(1000);
      const ok = await s.req(`${BASE}/batch`, { method: 'POST', headers: rw, body: { memories: Array.from({ length: 25 }, (_, i) => ({ content: `batch ${i}`, category: 'hobbies' })) } });
      t.equal(ok.status, 200);
      t.equal(ok.json.created_count, 25);
      t.same(ok.json.memories.map((m: { content: string }) => m.content), Array.from({ length: 25 }, (_, i) => `batch ${i}`), 'request order');
      t.equal((await rows(s, 'alice')).length, before.length + 25);
    });

    await t.test('pagination, ordering and category filter', async (t) => {
      const all = (await s.req(`${BASE}?limit=500`, { headers: ro })).json as { id: string; category: string; created_at: string }[];
      t.equal(all.length, 27);
      const sorted = [...all].sort((a, b) => (a.created_at === b.created_at ? (a.id < b.id ? 1 : -1) : a.created_at < b.created_at ? 1 : -1));
      t.same(all.map((m) => m.id), sorted.map((m) => m.id), 'created_at desc, id desc');
      const def = await s.req(BASE, { headers: ro });
      t.equal(def.json.length, 25, 'limit defaults to 25');
      const pages: string[] = [];
      for (let offset = 0; offset < 27; offset += 10) {
        const page = await s.req(`${BASE}?limit=10&offset=${offset}`, { headers: ro });
        pages.push(...page.json.map((m: { id: string }) => m.id));
      }
      t.same(pages, all.map((m) => m.id), 'pages neither overlap nor skip');
      t.same((await s.req(`${BASE}?offset=100`, { headers: ro })).json, []);

      const work = await s.req(`${BASE}?categories=work`, { headers: ro });
      t.same(work.json.map((m: { content: string }) => m.content), ['Works as a nurse']);
      const two = await s.req(`${BASE}?categories=work,%20other&limit=500`, { headers: ro });
      t.equal(two.json.length, 2);
      const bad = await s.req(`${BASE}?categories=work,bogus`, { headers: ro });
      t.equal(bad.status, 400);
      t.equal(bad.headers['x-error-code'], 'ENG_ERR_CATEGORY_INVALID');

      for (const q of ['limit=0', 'offset=-1', 'limit=abc']) {
        const r = await s.req(`${BASE}?${q}`, { headers: ro });
        t.equal(r.status, 422, q);
      }
    });

    await t.test('update', async (t) => {
      s.clock.advance(5000);
      const res = await s.req(`${BASE}/${firstId}`, { method: 'PATCH', headers: rw, body: { content: 'Loves green tea', tags: ['drink'] } });
      t.equal(res.status, 200);
      t.match(res.json, { id: firstId, content: 'Loves green tea', tags: ['drink'], category: 'other', visibility: 'private' });
      t.equal(res.json.updated_at, new Date(s.clock.now()).toISOString());
      t.not(res.json.updated_at, res.json.created_at);
      const vis = await s.req(`${BASE}/${firstId}`, { method: 'PATCH', headers: rw, body: { visibility: 'public', category: 'lifestyle' } });
      t.match(vis.json, { visibility: 'public', category: 'lifestyle', content: 'Loves green tea' });
      const [row] = await s.service.services.store.knex('memories').where({ id: firstId });
      t.match(row, { content: 'Loves green tea', visibility: 'public', category: 'lifestyle', tags: '["drink"]' });

      const none = await s.req(`${BASE}/${firstId}`, { method: 'PATCH', headers: rw, body: {} });
      t.equal(none.status, 422);
      t.match(none.json.detail[0], { loc: ['body'], type: 'value_error' });
      const badVis = await s.req(`${BASE}/${firstId}`, { method: 'PATCH', headers: rw, body: { visibility: 'everyone' } });
      t.equal(badVis.status, 422);
      const tooLong = await s.req(`${BASE}/${firstId}`, { method: 'PATCH', headers: rw, body: { content: 'x'.repeat(501) } });
      t.equal(tooLong.status, 422);
      const unknown = await s.req(`${BASE}/nope`, { method: 'PATCH', headers: rw, body: { content: 'x' } });
      t.equal(unknown.status, 404);
      t.same(unknown.json, { detail: 'Memory not found' });
      const others = await s.req(`${BASE}/${firstId}`, { method: 'PATCH', headers: bob, body: { content: 'hijack' } });
      t.equal(others.status, 404, "another user's memory is not found");
      const [after] = await s.service.services.store.knex('memories').where({ id: firstId });
      t.equal(after.content, 'Loves green tea');
    });

    await t.test('delete', async (t) => {
      const others = await s.req(`${BASE}/${firstId}`, { method: 'DELETE', headers: bob });
      t.equal(others.status, 404);
      const res = await s.req(`${BASE}/${firstId}`, { method: 'DELETE', headers: rw });
      t.equal(res.status, 200);
      t.same(res.json, { success: true });
      t.equal((await s.service.services.store.knex('memories').where({ id: firstId })).length, 0);
      const again = await s.req(`${BASE}/${firstId}`, { method: 'DELETE', headers: rw });
      t.equal(again.status, 404);
      t.same(again.json, { detail: 'Memory not found' });
    });

    await t.test('keys and scopes', async (t) => {
      const before = (await rows(s)).length;
      t.equal((await s.req(BASE)).status, 401);
      t.equal((await s.req(BASE, { method: 'POST', body: { content: 'x' } })).status, 401);
      const wrong = bearer(await s.devKey('alice', ['goals:read']));
      const noRead = await s.req(BASE, { headers: wrong });
      t.equal(noRead.status, 403);
      t.equal(noRead.headers['x-error-code'], 'ENG_ERR_AUTH_SCOPE_MISSING');
      for (const [method, path, body] of [
        ['POST', BASE, { content: 'x' }],
        ['POST', `${BASE}/batch`, { memories: [{ content: 'x' }] }],
        ['PATCH', `${BASE}/any`, { content: 'x' }],
        ['DELETE', `${BASE}/any`, undefined],
      ] as const) {
        const r = await s.req(path, { method, headers: ro, ...(body ? { body } : {}) });
        t.equal(r.status, 403, `${method} ${path} needs memories:write`);
        t.same(r.json, { detail: 'Insufficient permissions. Required scope: memories:write' });
      }
      const idToken = await s.req(BASE, { headers: bearer(await s.token('alice')) });
      t.equal(idToken.status, 401, 'an ID token is not a developer key');
      t.equal((await rows(s)).length, before);
    });

    await t.test('the memory readiness gate', async (t) => {
      const notReady = {
        detail: {
          code: 'developer_memory_access_not_ready',
          reason: 'missing_rollout_state',
          message: /valid and correctly scoped/,
        },
      };
      await s.service.services.users.setMemoryAccess('alice', false, s.clock.now());
      const before = (await rows(s)).length;
      for (const [method, path, body] of [
        ['GET', BASE, undefined],
        ['GET', `${BASE}?limit=9999&categories=bogus`, undefined],
        ['POST', BASE, { content: 'x' }],
        ['POST', BASE, { content: '' }],
        ['POST', `${BASE}/batch`, { memories: [{ content: 'x' }] }],
        ['PATCH', `${BASE}/any`, { content: 'x' }],
        ['DELETE', `${BASE}/any`, undefined],
      ] as const) {
        const r = await s.req(path, { method, headers: rw, ...(body ? { body } : {}) });
        t.equal(r.status, 403, `${method} ${path}`);
        t.equal(r.headers['x-error-code'], 'ENG_ERR_MEMORY_ACCESS_NOT_READY');
        t.match(r.json, notReady);
      }
      t.equal((await rows(s)).length, before, 'nothing written');
      t.equal((await s.req(BASE, { headers: bearer(await s.devKey('alice', ['goals:read'])) })).status, 403);
      t.equal((await s.req(BASE)).status, 401, 'the key check comes first');
      t.equal((await s.req(BASE, { headers: bob })).status, 200, 'other accounts are unaffected');

      await s.service.services.users.setMemoryAccess('alice', true, s.clock.now());
      t.equal((await s.req(BASE, { headers: rw })).status, 200, 'enabled again');
    });

    await t.test('conversation-extracted memories', async (t) => {
      const repo = s.service.services.memories;
      s.clock.advance(1000);
      await repo.createFromConversation('alice', 'conv-1', [{ content: 'Stale', category: 'other' }], s.clock.now());
      await repo.createFromConversation('alice', 'conv-1', [{ content: 'Has a dog named Rex', category: 'lifestyle' }, { content: 'Odd', category: 'interesting' }], s.clock.now());
      const stored = await s.service.services.store.knex('memories').where({ conversation_id: 'conv-1' }).orderBy('content');
      t.equal(stored.length, 2);
      t.match(stored[0], { content: 'Has a dog named Rex', category: 'lifestyle', visibility: 'private', tags: '[]', user_id: 'alice' });
      t.equal(stored[1].category, 'other', 'a category outside the enumeration becomes other');
      const list = await s.req(`${BASE}?limit=2`, { headers: ro });
      t.same(list.json.map((m: { manually_added: boolean }) => m.manually_added), [false, false]);
      await repo.createFromConversation('alice', 'conv-1', [], s.clock.now());
      t.equal((await s.service.services.store.knex('memories').where({ conversation_id: 'conv-1' })).length, 0, 'reprocessing replaces what an earlier run derived');
    });
  });
}

t.test('an account without a users row gets the deployment default', async (t) => {
  const s = await startService(t, { env: { MEMORY_ACCESS_DEFAULT: 'disabled' } });
  const key = bearer(await s.devKey('carol', ['memories:read', 'memories:write']));
  const res = await s.req(BASE, { headers: key });
  t.equal(res.status, 403, 'new accounts start disabled under MEMORY_ACCESS_DEFAULT=disabled');
  t.equal(res.json.detail.code, 'developer_memory_access_not_ready');
  // The account row, once it exists, decides over the default (written through the repository, as every gate change is,
  // so nodes that remember the gate hear of it).
  await s.service.services.users.setMemoryAccess('carol', true, s.clock.now());
  t.equal((await s.req(BASE, { headers: key })).status, 200);
});

t.test('legacy memory paths answer 404', async (t) => {
  const s = await startService(t);
  const key = bearer(await s.devKey('alice', ['memories:read', 'memories:write']));
  for (const path of ['/v1/memories', '/v2/memories', '/v1/memories/abc', '/v2/memories?limit=10']) {
    for (const method of ['GET', 'POST']) {
      const r = await s.req(path, { method, headers: key, ...(method === 'POST' ? { body: { content: 'x' } } : {}) });
      t.equal(r.status, 404, `${method} ${path}`);
    }
  }
});
