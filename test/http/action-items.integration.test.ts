// Standalone action items over real sockets on sqlite and PostgreSQL: CRUD, completion times, filters, batch all-or-nothing, scopes.
import t from 'tap';
import { startService, type TestService } from '../helpers/service.js';
import { bearer } from '../helpers/http.js';
import { STORES } from '../helpers/stores.js';

const BASE = '/v1/dev/user/action-items';

async function rows(s: TestService, uid?: string): Promise<Record<string, any>[]> {
  const q = s.service.services.store.knex('action_items').select('*');
  if (uid) q.where({ user_id: uid });
  return q;
}

const iso = (s: TestService): string => new Date(s.clock.now()).toISOString();

for (const store of STORES) {
  t.test(`action items on ${store}`, async (t) => {
    const s = await startService(t, { store });
    s.clock.set(Date.UTC(2026, 10, 20, 9, 0, 0));
    const rw = bearer(await s.devKey('alice', ['action_items:read', 'action_items:write']));
    const ro = bearer(await s.devKey('alice', ['action_items:read']));
    const bob = bearer(await s.devKey('bob', ['action_items:read', 'action_items:write']));

    let callId = '';
    await t.test('create with defaults and with a due date', async (t) => {
      const res = await s.req(BASE, { method: 'POST', headers: rw, body: { description: 'Call the dentist' } });
      t.equal(res.status, 200);
      t.same(res.json, {
        id: res.json.id,
        description: 'Call the dentist',
        completed: false,
        created_at: iso(s),
        updated_at: iso(s),
        due_at: null,
        completed_at: null,
        conversation_id: null,
      });
      callId = res.json.id;
      t.match((await rows(s, 'alice'))[0], { id: callId, description: 'Call the dentist', due_at: null, completed_at: null });

      s.clock.advance(60_000);
      const due = await s.req(BASE, { method: 'POST', headers: rw, body: { description: 'Pay rent', due_at: '2026-12-01T10:00:00+02:00' } });
      t.equal(due.status, 200);
      t.equal(due.json.due_at, '2026-12-01T08:00:00.000Z', 'stored and shown in UTC');
      const done = await s.req(BASE, { method: 'POST', headers: rw, body: { description: 'Already done', completed: true } });
      t.match(done.json, { completed: true, completed_at: iso(s) });
    });

    await t.test('bad input writes nothing', async (t) => {
      const before = (await rows(s)).length;
      const cases: [unknown, string][] = [
        [{ description: 'x'.repeat(501) }, 'string_too_long'],
        [{ description: '' }, 'string_too_short'],
        [{}, 'missing'],
        [{ description: 'x', due_at: 'tomorrow' }, 'datetime_parsing'],
        [{ description: 'x', completed: 'yes' }, 'bool_type'],
      ];
      for (const [body, type] of cases) {
        const r = await s.req(BASE, { method: 'POST', headers: rw, body });
        t.equal(r.status, 422, JSON.stringify(body).slice(0, 60));
        t.ok(r.json.detail.some((d: { type: string }) => d.type === type), type);
      }
      t.equal((await s.req(BASE, { method: 'POST', headers: rw, body: { description: 'y'.repeat(500) } })).status, 200, '500 characters is allowed');
      await s.service.services.store.knex('action_items').where({ description: 'y'.repeat(500) }).delete();
      t.equal((await rows(s)).length, before);
    });

    await t.test('batch: all or nothing, at most 50', async (t) => {
      const before = (await rows(s)).length;
      const tooMany = await s.req(`${BASE}/batch`, { method: 'POST', headers: rw, body: { action_items: Array.from({ length: 51 }, (_, i) => ({ description: `a${i}` })) } });
      t.equal(tooMany.status, 422);
      t.match(tooMany.json.detail[0], { loc: ['body', 'action_items'], type: 'too_long' });
      const oneBad = await s.req(`${BASE}/batch`, { method: 'POST', headers: rw, body: { action_items: [{ description: 'ok' }, { description: '' }] } });
      t.equal(oneBad.status, 422);
      t.equal((await rows(s)).length, before, 'nothing written');
      const empty = await s.req(`${BASE}/batch`, { method: 'POST', headers: rw, body: { action_items: [] } });
      t.same(empty.json, { action_items: [], created_count: 0 });

      s.clock.set(Date.UTC(2026, 10, 22, 9, 0, 0));
      const ok = await s.req(`${BASE}/batch`, {
        method: 'POST',
        headers: rw,
        body: { action_items: Array.from({ length: 50 }, (_, i) => ({ description: `task ${i}`, completed: i % 2 === 0, ...(i === 0 ? { due_at: '2026-11-30T00:00:00Z' } : {}) })) },
      });
      t.equal(ok.status, 200);
      t.equal(ok.json.created_count, 50);
      t.equal(ok.json.action_items.length, 50);
      t.match(ok.json.action_items[0], { description: 'task 0', completed: true, completed_at: iso(s), due_at: '2026-11-30T00:00:00.000Z' });
      t.match(ok.json.action_items[1], { description: 'task 1', completed: false, completed_at: null });
      t.equal((await rows(s)).length, before + 50);
    });

    await t.test('list: default page, ordering, filters', async (t) => {
      const all = await s.req(`${BASE}?limit=500`, { headers: ro });
      t.equal(all.json.length, 53);
      const def = await s.req(BASE, { headers: ro });
      t.equal(def.json.length, 53, 'limit defaults to 100');
      t.equal(all.json.at(-1).id, callId, 'oldest last');
      const created = all.json.map((i: { created_at: string }) => i.created_at);
      t.same(created, [...created].sort().reverse(), 'created_at descending');

      const pages: string[] = [];
      for (let offset = 0; offset < 53; offset += 20) pages.push(...(await s.req(`${BASE}?limit=20&offset=${offset}`, { headers: ro })).json.map((i: { id: string }) => i.id));
      t.same(pages, all.json.map((i: { id: string }) => i.id), 'pages neither overlap nor skip');

      const open = await s.req(`${BASE}?completed=false&limit=500`, { headers: ro });
      t.equal(open.json.length, 27);
      t.ok(open.json.every((i: { completed: boolean }) => !i.completed));
      const closed = await s.req(`${BASE}?completed=true&limit=500`, { headers: ro });
      t.equal(closed.json.length, 26);

      const early = await s.req(`${BASE}?end_date=2026-11-21`, { headers: ro });
      t.same(early.json.map((i: { description: string }) => i.description).sort(), ['Already done', 'Call the dentist', 'Pay rent']);
      const late = await s.req(`${BASE}?start_date=2026-11-22T09:00:00Z&limit=500`, { headers: ro });
      t.equal(late.json.length, 50, 'start_date is inclusive');
      const window = await s.req(`${BASE}?start_date=2026-11-20T09:00:30Z&end_date=2026-11-20T09:01:00Z`, { headers: ro });
      t.same(window.json.map((i: { description: string }) => i.description).sort(), ['Already done', 'Pay rent'], 'end_date is inclusive');

      const repo = s.service.services.actionItems;
      await repo.createFromConversation('alice', 'conv-9', [{ description: 'Stale', dueAt: null }], s.clock.now());
      await repo.createFromConversation('alice', 'conv-9', [{ description: 'Send slides', dueAt: '2026-11-25T12:00:00.000Z' }, { description: 'Book room', dueAt: null }], s.clock.now());
      const conv = await s.req(`${BASE}?conversation_id=conv-9`, { headers: ro });
      t.equal(conv.json.length, 2, 'a second run replaces the first');
      t.match(conv.json.find((i: { description: string }) => i.description === 'Send slides'), { conversation_id: 'conv-9', completed: false, due_at: '2026-11-25T12:00:00.000Z' });

      t.same((await s.req(BASE, { headers: bob })).json, [], 'per user');
      for (const q of ['limit=0', 'offset=-1', 'completed=maybe', 'start_date=yesterday']) {
        t.equal((await s.req(`${BASE}?${q}`, { headers: ro })).status, 422, q);
      }
    });

    await t.test('update: completion sets and clears completed_at', async (t) => {
      s.clock.advance(3_600_000);
      const firstDone = iso(s);
      const done = await s.req(`${BASE}/${callId}`, { method: 'PATCH', headers: rw, body: { completed: true } });
      t.equal(done.status, 200);
      t.match(done.json, { id: callId, completed: true, completed_at: firstDone, updated_at: firstDone, description: 'Call the dentist' });
      s.clock.advance(1000);
      const again = await s.req(`${BASE}/${callId}`, { method: 'PATCH', headers: rw, body: { completed: true, description: 'Call the dentist today' } });
      t.match(again.json, { completed_at: firstDone, description: 'Call the dentist today' }, 'completing twice keeps the first completion time');
      const reopen = await s.req(`${BASE}/${callId}`, { method: 'PATCH', headers: rw, body: { completed: false } });
      t.match(reopen.json, { completed: false, completed_at: null });
      const due = await s.req(`${BASE}/${callId}`, { method: 'PATCH', headers: rw, body: { due_at: '2026-12-24T18:00:00Z' } });
      t.equal(due.json.due_at, '2026-12-24T18:00:00.000Z');
      let [row] = await s.service.services.store.knex('action_items').where({ id: callId });
      t.match(row, { due_at: '2026-12-24T18:00:00.000Z', completed_at: null, description: 'Call the dentist today' });
      const clear = await s.req(`${BASE}/${callId}`, { method: 'PATCH', headers: rw, body: { due_at: null } });
      t.equal(clear.json.due_at, null, 'null clears the due date');
      [row] = await s.service.services.store.knex('action_items').where({ id: callId });
      t.equal(row.due_at, null);

      t.equal((await s.req(`${BASE}/${callId}`, { method: 'PATCH', headers: rw, body: {} })).status, 422, 'no field');
      t.equal((await s.req(`${BASE}/${callId}`, { method: 'PATCH', headers: rw, body: { description: '' } })).status, 422);
      t.equal((await s.req(`${BASE}/${callId}`, { method: 'PATCH', headers: rw, body: { due_at: 'soon' } })).status, 422);
      const unknown = await s.req(`${BASE}/nope`, { method: 'PATCH', headers: rw, body: { completed: true } });
      t.equal(unknown.status, 404);
      t.same(unknown.json, { detail: 'Action item not found' });
      t.equal((await s.req(`${BASE}/${callId}`, { method: 'PATCH', headers: bob, body: { completed: true } })).status, 404, "another user's item");
      [row] = await s.service.services.store.knex('action_items').where({ id: callId });
      t.notOk(row.completed === true || row.completed === 1, 'unchanged');
    });

    await t.test('delete', async (t) => {
      t.equal((await s.req(`${BASE}/${callId}`, { method: 'DELETE', headers: bob })).status, 404);
      const res = await s.req(`${BASE}/${callId}`, { method: 'DELETE', headers: rw });
      t.equal(res.status, 200);
      t.same(res.json, { success: true });
      t.equal((await s.service.services.store.knex('action_items').where({ id: callId })).length, 0);
      t.same((await s.req(`${BASE}/${callId}`, { method: 'DELETE', headers: rw })).json, { detail: 'Action item not found' });
    });

    await t.test('keys and scopes', async (t) => {
      const before = (await rows(s)).length;
      t.equal((await s.req(BASE)).status, 401);
      const wrong = await s.req(BASE, { headers: bearer(await s.devKey('alice', ['memories:read'])) });
      t.equal(wrong.status, 403);
      t.same(wrong.json, { detail: 'Insufficient permissions. Required scope: action_items:read' });
      for (const [method, path, body] of [
        ['POST', BASE, { description: 'x' }],
        ['POST', `${BASE}/batch`, { action_items: [{ description: 'x' }] }],
        ['PATCH', `${BASE}/any`, { completed: true }],
        ['DELETE', `${BASE}/any`, undefined],
      ] as const) {
        const r = await s.req(path, { method, headers: ro, ...(body ? { body } : {}) });
        t.equal(r.status, 403, `${method} ${path}`);
        t.same(r.json, { detail: 'Insufficient permissions. Required scope: action_items:write' });
        t.equal((await s.req(path, { method, ...(body ? { body } : {}) })).status, 401, `${method} ${path} without a key`);
      }
      t.equal((await rows(s)).length, before);
    });
  });
}
