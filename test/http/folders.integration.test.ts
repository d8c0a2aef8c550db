// Folder routes over real sockets on sqlite and PostgreSQL: the developer list, management with the ID token, filing conversations.
import t from 'tap';
import { startService } from '../helpers/service.js';
import { bearer } from '../helpers/http.js';
import { STORES } from '../helpers/stores.js';

for (const store of STORES) {
  t.test(`folders on ${store}`, async (t) => {
    const s = await startService(t, { store });
    const alice = bearer(await s.token('alice'));
    const bob = bearer(await s.token('bob'));
    const devRead = bearer(await s.devKey('alice', ['conversations:read', 'conversations:write']));
    const devMemories = bearer(await s.devKey('alice', ['memories:read']));

    const created = await s.req('/v1/dev/user/conversations', { method: 'POST', headers: devRead, body: { text: 'We need to fix the backend bug before the API deploy.' } });
    const convId = created.json.id as string;

    await t.test('create, list, rename', async (t) => {
      const work = await s.req('/v1/folders', { method: 'POST', headers: alice, body: { name: '  Work  ' } });
      t.equal(work.status, 200);
      t.match(work.json, { id: String, name: 'Work', created_at: String, updated_at: String, conversation_count: 0 });
      s.clock.advance(1000);
      const home = await s.req('/v1/folders', { method: 'POST', headers: alice, body: { name: 'Home' } });
      t.equal(home.status, 200);

      const dev = await s.req('/v1/dev/user/folders', { headers: devRead });
      t.equal(dev.status, 200);
      t.same(dev.json.map((f: { name: string }) => f.name), ['Work', 'Home'], 'oldest first');
      t.same(Object.keys(dev.json[0]).sort(), ['conversation_count', 'created_at', 'id', 'name', 'updated_at']);
      const mine = await s.req('/v1/folders', { headers: alice });
      t.same(mine.json, dev.json, 'the same list for the signed-in user');
      t.same((await s.req('/v1/folders', { headers: bob })).json, [], 'per user');

      const taken = await s.req('/v1/folders', { method: 'POST', headers: alice, body: { name: 'Home' } });
      t.equal(taken.status, 422);
      t.match(taken.json.detail[0], { loc: ['body', 'name'], type: 'value_error' });
      t.equal((await s.req('/v1/folders', { method: 'POST', headers: bob, body: { name: 'Home' } })).status, 200, 'another user may use the name');
      t.equal((await s.req('/v1/folders', { method: 'POST', headers: alice, body: { name: ' ' } })).status, 422, 'blank');
      t.equal((await s.req('/v1/folders', { method: 'POST', headers: alice, body: { name: 'x'.repeat(101) } })).status, 422, 'too long');

      s.clock.advance(1000);
      const renamed = await s.req(`/v1/folders/${home.json.id}`, { method: 'PATCH', headers: alice, body: { name: 'Personal' } });
      t.equal(renamed.status, 200);
      t.equal(renamed.json.name, 'Personal');
      t.not(renamed.json.updated_at, home.json.updated_at);
      t.equal((await s.req(`/v1/folders/${home.json.id}`, { method: 'PATCH', headers: alice, body: { name: 'Work' } })).status, 422, 'rename onto a taken name');
      t.equal((await s.req(`/v1/folders/${home.json.id}`, { method: 'PATCH', headers: alice, body: { name: 'Personal' } })).status, 200, 'renaming to its own name is fine');
      t.equal((await s.req(`/v1/folders/${home.json.id}`, { method: 'PATCH', headers: bob, body: { name: 'Mine' } })).status, 404, "another user's folder");
    });

    await t.test('file a conversation, then delete the folder', async (t) => {
      const folder = (await s.req('/v1/folders', { method: 'POST', headers: alice, body: { name: 'Engineering' } })).json;
      const filed = await s.req(`/v1/folders/${folder.id}/conversations/${convId}`, { method: 'PUT', headers: alice });
      t.equal(filed.status, 200);
      t.match(filed.json, { id: convId, folder_id: folder.id, folder_name: 'Engineering' });
      t.equal((await s.req(`/v1/folders/${folder.id}/conversations/${convId}`, { method: 'PUT', headers: alice })).status, 200, 'idempotent');

      const read = await s.req(`/v1/dev/user/conversations/${convId}`, { headers: devRead });
      t.match(read.json, { folder_id: folder.id, folder_name: 'Engineering' }, 'the developer view shows the folder');
      const count = (await s.req('/v1/dev/user/folders', { headers: devRead })).json.find((f: { id: string }) => f.id === folder.id);
      t.equal(count.conversation_count, 1);

      t.equal((await s.req(`/v1/folders/${folder.id}/conversations/${convId}`, { method: 'PUT', headers: bob })).status, 404, "bob cannot use alice's folder");
      const bobFolder = (await s.req('/v1/folders', { method: 'POST', headers: bob, body: { name: 'Stolen' } })).json;
      t.equal((await s.req(`/v1/folders/${bobFolder.id}/conversations/${convId}`, { method: 'PUT', headers: bob })).status, 404, "nor file alice's conversation");
      t.equal((await s.req(`/v1/folders/${folder.id}/conversations/00000000-0000-0000-0000-000000000000`, { method: 'PUT', headers: alice })).status, 404);

      const del = await s.req(`/v1/folders/${folder.id}`, { method: 'DELETE', headers: alice });
      t.equal(del.status, 200);
      t.same(del.json, { success: true });
      const after = await s.req(`/v1/dev/user/conversations/${convId}`, { headers: devRead });
      t.equal(after.status, 200, 'the conversation stays');
      t.match(after.json, { folder_id: null, folder_name: null });
      t.equal((await s.req(`/v1/folders/${folder.id}`, { method: 'DELETE', headers: alice })).status, 404, 'twice → 404');
    });

    await t.test('take a conversation out of a folder', async (t) => {
      const folder = (await s.req('/v1/folders', { method: 'POST', headers: alice, body: { name: 'Later' } })).json;
      await s.req(`/v1/folders/${folder.id}/conversations/${convId}`, { method: 'PUT', headers: alice });
      const out = await s.req(`/v1/folders/${folder.id}/conversations/${convId}`, { method: 'DELETE', headers: alice });
      t.equal(out.status, 200);
      t.equal(out.json.folder_id, null);
      t.equal((await s.req(`/v1/folders/${folder.id}/conversations/${convId}`, { method: 'DELETE', headers: alice })).status, 404, 'not in that folder any more');
    });

    await t.test('auth', async (t) => {
      t.equal((await s.req('/v1/dev/user/folders')).status, 401);
      t.equal((await s.req('/v1/dev/user/folders', { headers: devMemories })).status, 403, 'needs conversations:read');
      t.equal((await s.req('/v1/dev/user/folders', { headers: alice })).status, 401, 'the developer list takes a key, not the ID token');
      t.equal((await s.req('/v1/folders', { headers: devRead })).status, 401, 'folder management takes the ID token, not a key');
      t.equal((await s.req('/v1/folders', { method: 'POST', headers: devRead, body: { name: 'x' } })).status, 401);
    });
  });
}
