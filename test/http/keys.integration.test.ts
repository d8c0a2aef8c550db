// API key lifecycle and the developer bearer check, over real sockets on sqlite and PostgreSQL with real Redis.
import t from 'tap';
import { Type } from '@sinclair/typebox';
import { startService, type TestService } from '../helpers/service.js';
import { bearer } from '../helpers/http.js';
import { STORES } from '../helpers/stores.js';
import { hashKey } from '../../engine/identity/key-format.js';
import type { AppRoute } from '../../http/routes/types.js';
import { waitFor } from '../helpers/until.js';

/** A developer route guarded like every /v1/dev/user/* route, so the bearer check can be exercised on its own. */
const probeRoutes = (): AppRoute[] => [
  {
    method: 'get',
    path: '/v1/dev/user/probe',
    operationId: 'probe',
    summary: 'probe',
    auth: { kind: 'api_key', scope: 'memories:read' },
    handler: ({ auth }) => ({ body: { uid: auth.uid, via: auth.via } }),
  },
  {
    method: 'post',
    path: '/v1/dev/user/probe',
    operationId: 'probeWrite',
    summary: 'probe',
    auth: { kind: 'api_key', scope: 'memories:write' },
    body: Type.Object({ n: Type.Integer() }),
    handler: ({ body }) => ({ body }),
  },
];

const READ_SCOPES = ['conversations:read', 'memories:read', 'action_items:read', 'goals:read'];

async function keyRows(s: TestService): Promise<Record<string, unknown>[]> {
  return s.service.services.store.knex('api_keys').select('*');
}

for (const store of STORES) {
  t.test(`keys on ${store}`, async (t) => {
    const s = await startService(t, { store, extraRoutes: probeRoutes });
    const alice = await s.token('alice');
    const bob = await s.token('bob');

    await t.test('create returns the secret once, with the read scopes by default', async (t) => {
      const res = await s.req('/v1/dev/keys', { method: 'POST', headers: bearer(alice), body: { name: 'laptop' } });
      t.equal(res.status, 200);
      t.match(res.json, { id: String, name: 'laptop', key_prefix: /^svc_dev_.{4}\.\.\..{4}$/, created_at: String, last_used_at: null, key: /^svc_dev_[0-9A-Za-z]{28}$/ });
      t.same(res.json.scopes, READ_SCOPES);
      t.ok(res.json.key.startsWith(res.json.key_prefix.slice(0, 12)), 'prefix shows the start of the key');
      const rows = await keyRows(s);
      const row = rows.find((r) => r.id === res.json.id)!;
      t.equal(row.key_hash, hashKey(res.json.key), 'only the hash is stored');
      t.notOk(JSON.stringify(rows).includes(res.json.key), 'the secret is nowhere in the store');

      const list = await s.req('/v1/dev/keys', { headers: bearer(alice) });
      t.equal(list.status, 200);
      t.equal(list.json.length, 1);
      t.notOk('key' in list.json[0], 'list never shows the secret');
      t.equal(list.json[0].key_prefix, res.json.key_prefix);
    });

    await t.test('list is newest first and per user', async (t) => {
      s.clock.advance(1000);
      const second = await s.req('/v1/dev/keys', { method: 'POST', headers: bearer(alice), body: { name: 'ci', scopes: ['goals:write', 'memories:read', 'goals:write'] } });
      t.same(second.json.scopes, ['memories:read', 'goals:write'], 'canonical order, no duplicates');
      const list = await s.req('/v1/dev/keys', { headers: bearer(alice) });
      t.same(list.json.map((k: { name: string }) => k.name), ['ci', 'laptop']);
      const other = await s.req('/v1/dev/keys', { headers: bearer(bob) });
      t.same(other.json, []);
    });

    await t.test('bad input is refused and writes nothing', async (t) => {
      const before = (await keyRows(s)).length;
      const blank = await s.req('/v1/dev/keys', { method: 'POST', headers: bearer(alice), body: { name: '   ' } });
      t.equal(blank.status, 422);
      t.match(blank.json.detail[0], { loc: ['body', 'name'], type: 'value_error' });
      const unknown = await s.req('/v1/dev/keys', { method: 'POST', headers: bearer(alice), body: { name: 'x', scopes: ['memories:read', 'everything'] } });
      t.equal(unknown.status, 400);
      t.equal(unknown.headers['x-error-code'], 'ENG_ERR_KEY_SCOPE_UNKNOWN');
      t.match(unknown.json.detail, /conversations:read.*goals:write/, 'lists the valid scopes');
      const wrongType = await s.req('/v1/dev/keys', { method: 'POST', headers: bearer(alice), body: { name: 5 } });
      t.equal(wrongType.status, 422);
      t.match(wrongType.json.detail[0], { loc: ['body', 'name'], type: 'string_type' });
      const missing = await s.req('/v1/dev/keys', { method: 'POST', headers: bearer(alice), body: {} });
      t.match(missing.json.detail[0], { loc: ['body', 'name'], msg: 'Field required', type: 'missing' });
      const malformed = await s.req('/v1/dev/keys', { method: 'POST', headers: bearer(alice), body: '{"name": ' });
      t.equal(malformed.status, 422);
      t.equal(malformed.json.detail[0].type, 'json_invalid');
      const emptyScopes = await s.req('/v1/dev/keys', { method: 'POST', headers: bearer(alice), body: { name: 'x', scopes: [] } });
      t.equal(emptyScopes.status, 422);
      const longName = await s.req('/v1/dev/keys', { method: 'POST', headers: bearer(alice), body: { name: 'x'.repeat(201) } });
      t.match(longName.json.detail[0], { type: 'string_too_long' });
      t.equal((await keyRows(s)).length, before, 'store unchanged');
    });

    await t.test('key routes take the ID token only', async (t) => {
      const key = await s.devKey('alice', ['memories:read', 'memories:write']);
      const withKey = await s.req('/v1/dev/keys', { headers: bearer(key) });
      t.equal(withKey.status, 401, 'a developer key cannot list keys');
      const createWithKey = await s.req('/v1/dev/keys', { method: 'POST', headers: bearer(key), body: { name: 'x' } });
      t.equal(createWithKey.status, 401, 'nor create them');
      const none = await s.req('/v1/dev/keys');
      t.equal(none.status, 401);
      t.same(none.json, { detail: 'Not authenticated' });
      const garbage = await s.req('/v1/dev/keys', { headers: bearer('not-a-token') });
      t.equal(garbage.status, 401);
      t.equal(garbage.headers['x-error-code'], 'ENG_ERR_AUTH_TOKEN_INVALID');
      const expired = await s.token('alice', 60);
      s.clock.advance(60_000 + 30_000 + 1000); // lifetime + the default clock tolerance + 1 s
      const late = await s.req('/v1/dev/keys', { headers: bearer(expired) });
      t.equal(late.status, 401, 'an expired ID token is refused');
    });

    await t.test('the developer bearer check', async (t) => {
      const key = await s.devKey('alice', ['memories:read']);
      const ok = await s.req('/v1/dev/user/probe', { headers: bearer(key) });
      t.equal(ok.status, 200);
      t.same(ok.json, { uid: 'alice', via: 'api_key' });

      const missing = await s.req('/v1/dev/user/probe');
      t.equal(missing.status, 401);
      t.same(missing.json, { detail: "Missing or invalid Authorization header. Must be 'Bearer API_KEY'" });
      const basic = await s.req('/v1/dev/user/probe', { headers: { authorization: `Basic ${key}` } });
      t.equal(basic.status, 401);
      t.equal(basic.headers['x-error-code'], 'ENG_ERR_AUTH_HEADER_MISSING');

      const typo = key.slice(0, -1) + (key.endsWith('a') ? 'b' : 'a');
      const bad = await s.req('/v1/dev/user/probe', { headers: bearer(typo) });
      t.equal(bad.status, 401);
      t.same(bad.json, { detail: 'Invalid API Key' });

      const mcp = await s.req('/v1/dev/keys', { method: 'POST', headers: bearer(alice), body: { name: 'assistant', key_type: 'mcp', scopes: ['memories:read'] } });
      t.match(mcp.json.key, /^svc_mcp_/);
      const mcpOnRest = await s.req('/v1/dev/user/probe', { headers: bearer(mcp.json.key) });
      t.equal(mcpOnRest.status, 401, 'an MCP key does not authenticate REST');
      t.equal(mcpOnRest.headers['x-error-code'], 'ENG_ERR_AUTH_KEY_WRONG_KIND');

      const idToken = await s.req('/v1/dev/user/probe', { headers: bearer(alice) });
      t.equal(idToken.status, 401, 'an ID token is not a developer key');

      const scope = await s.req('/v1/dev/user/probe', { method: 'POST', headers: bearer(key), body: { n: 1 } });
      t.equal(scope.status, 403);
      t.same(scope.json, { detail: 'Insufficient permissions. Required scope: memories:write' });
    });

    await t.test('last_used_at is written at most once a minute', async (t) => {
      const key = await s.devKey('carol');
      const id = (await s.service.services.apiKeys.findByHash(hashKey(key)))!.id;
      const lastUsed = async () => (await s.service.services.store.knex('api_keys').where({ id }).first('last_used_at')).last_used_at as string | null;
      // The write is asked for before the request is answered, and lands later: counting the asks proves there was none.
      const keys = s.service.services.apiKeys;
      const touch = keys.touch;
      let writes = 0;
      keys.touch = function (this: typeof keys, keyId: string, now: number) {
        if (keyId === id) writes++;
        return touch.call(this, keyId, now);
      };
      t.teardown(() => void (keys.touch = touch));
      t.equal(await lastUsed(), null);
      await s.req('/v1/dev/user/probe', { headers: bearer(key) });
      t.equal(writes, 1, 'the first use is written');
      const first = await waitFor(lastUsed, { what: 'the first write', done: (v) => v !== null });
      t.equal(first, new Date(s.clock.now()).toISOString());
      s.clock.advance(30_000);
      for (let i = 0; i < 5; i++) await s.req('/v1/dev/user/probe', { headers: bearer(key) });
      t.equal(writes, 1, 'no write within the minute');
      s.clock.advance(31_000);
      await s.req('/v1/dev/user/probe', { headers: bearer(key) });
      t.equal(writes, 2, 'the first use after the minute is written');
      const second = await waitFor(lastUsed, { what: 'the second write', done: (v) => v !== first });
      t.equal(second, new Date(s.clock.now()).toISOString());
      const list = await s.req('/v1/dev/keys', { headers: bearer(await s.token('carol')) });
      t.equal(list.json[0].last_used_at, second, 'visible in the key list');
    });

    await t.test('revocation is immediate, cache included, and on every node', async (t) => {
      const other = await startService(t, { sameDeploymentAs: s, extraRoutes: probeRoutes });
      const created = await s.req('/v1/dev/keys', { method: 'POST', headers: bearer(alice), body: { name: 'doomed', scopes: ['memories:read'] } });
      const key = created.json.key as string;
      t.equal((await s.req('/v1/dev/user/probe', { headers: bearer(key) })).status, 200, 'warm the cache here');
      t.equal((await other.req('/v1/dev/user/probe', { headers: bearer(key) })).status, 200, 'and on the other node');

      const notMine = await s.req(`/v1/dev/keys/${created.json.id}`, { method: 'DELETE', headers: bearer(bob) });
      t.equal(notMine.status, 404, "another user's key is not found");
      t.equal((await s.req('/v1/dev/user/probe', { headers: bearer(key) })).status, 200, 'and still works');

      const del = await s.req(`/v1/dev/keys/${created.json.id}`, { method: 'DELETE', headers: bearer(alice) });
      t.equal(del.status, 204);
      t.equal(del.text, '');
      t.equal((await s.req('/v1/dev/user/probe', { headers: bearer(key) })).status, 401, 'refused at once on this node');
      const remote = await waitFor(() => other.req('/v1/dev/user/probe', { headers: bearer(key) }).then((r) => r.status), { what: 'the revocation on the other node', done: (st) => st === 401 });
      t.equal(remote, 401, 'and on the other node');
      const again = await s.req(`/v1/dev/keys/${created.json.id}`, { method: 'DELETE', headers: bearer(alice) });
      t.equal(again.status, 404, 'revocation is permanent: the key is gone');
      const list = await s.req('/v1/dev/keys', { headers: bearer(alice) });
      t.notOk(list.json.some((k: { id: string }) => k.id === created.json.id));
    });
  });
}
