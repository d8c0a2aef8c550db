// Migrations run up, down and up again on sqlite and PostgreSQL; repositories behave the same on both.
import t from 'tap';
import { UsersRepository } from '../../../engine/db/users.js';
import { UNVERSIONED } from '../../../engine/cache/data-versions.js';
import { ApiKeysRepository } from '../../../engine/db/api-keys.js';
import { STORES, openTestStore } from '../../helpers/stores.js';

for (const kind of STORES) {
  t.test(`store on ${kind}`, async (t) => {
    const store = openTestStore(t, kind);
    t.equal(store.dialect, kind);

    const applied = await store.migrate();
    t.ok(applied.length >= 1, 'migrations applied');
    t.same(await store.migrate(), [], 'a second run applies nothing');
    t.ok(await store.knex.schema.hasTable('api_keys'));

    const reverted = await store.rollbackAll();
    t.equal(reverted.length, applied.length, 'every migration has a down');
    t.notOk(await store.knex.schema.hasTable('api_keys'));
    t.same(await store.migrate(), applied, 'and they apply again');

    const users = new UsersRepository(store.knex, UNVERSIONED);
    const keys = new ApiKeysRepository(store.knex);
    const now = Date.UTC(2026, 10, 23);
    await Promise.all([users.ensure('u1', now), users.ensure('u1', now)]);
    t.match(await users.get('u1'), { id: 'u1', memoryAccessEnabled: false });
    const rec = await keys.create({ userId: 'u1', kind: 'dev', name: 'k', hash: 'a'.repeat(64), prefix: 'svc_dev_aaaa...aaaa', scopes: ['memories:read'], now });
    t.same((await keys.findByHash('a'.repeat(64)))?.scopes, ['memories:read']);
    await t.rejects(keys.create({ userId: 'u1', kind: 'dev', name: 'k2', hash: 'a'.repeat(64), prefix: 'p', scopes: [], now }), 'key hashes are unique');
    await t.rejects(keys.create({ userId: 'nobody', kind: 'dev', name: 'k3', hash: 'b'.repeat(64), prefix: 'p', scopes: [], now }), 'keys belong to a user');
    t.equal(await keys.revoke('someone-else', rec.id), undefined, 'only the owner revokes');
    t.equal(await keys.revoke('u1', rec.id), 'a'.repeat(64));
    t.equal(await keys.findByHash('a'.repeat(64)), undefined);
    await store.ping();
  });
}
