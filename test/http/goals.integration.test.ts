// Goals over real sockets on sqlite and PostgreSQL: CRUD, the 3-active rule, value rules, per-UTC-day progress history, scopes.
import t from 'tap';
import { startService, type TestService } from '../helpers/service.js';
import { bearer } from '../helpers/http.js';
import { STORES } from '../helpers/stores.js';

const BASE = '/v1/dev/user/goals';
const HOUR = 3_600_000;

const iso = (s: TestService): string => new Date(s.clock.now()).toISOString();
const goalRow = async (s: TestService, id: string): Promise<Record<string, any> | undefined> => (await s.service.services.store.knex('goals').where({ id }))[0];
const historyRows = (s: TestService, id: string): Promise<Record<string, any>[]> => s.service.services.store.knex('goal_history').where({ goal_id: id }).orderBy('date');

for (const store of STORES) {
  t.test(`goals on ${store}`, async (t) => {
    const s = await startService(t, { store });
    s.clock.set(Date.UTC(2026, 10, 23, 8, 0, 0));
    const rw = bearer(await s.devKey('alice', ['goals:read', 'goals:write']));
    const ro = bearer(await s.devKey('alice', ['goals:read']));
    const bob = bearer(await s.devKey('bob', ['goals:read', 'goals:write']));
    const create = (body: unknown, headers = rw) => s.req(BASE, { method: 'POST', headers, body });

    let sleepId = '';
    await t.test('create with defaults', async (t) => {
      const res = await create({ title: 'Sleep well', target_value: 8 });
      t.equal(res.status, 200);
      t.same(res.json, {
        id: res.json.id,
        title: 'Sleep well',
        goal_type: 'scale',
        target_value: 8,
        current_value: 0,
        min_value: 0,
        max_value: 10,
        unit: null,
        is_active: true,
        created_at: iso(s),
        updated_at: iso(s),
      });
      t.match(res.json.id, /^goal_[0-9a-f]{12}$/);
      sleepId = res.json.id;
      t.match(await goalRow(s, sleepId), { user_id: 'alice', title: 'Sleep well', goal_type: 'scale', target_value: 8, unit: null });
      const get = await s.req(`${BASE}/${sleepId}`, { headers: ro });
      t.same(get.json, res.json);

      const bool = await create({ title: 'Meditate', goal_type: 'boolean', target_value: 1 });
      t.match(bool.json, { goal_type: 'boolean', min_value: 0, max_value: 1, current_value: 0 });
      const num = await create({ title: 'Walk', goal_type: 'numeric', target_value: 10000, unit: 'steps', current_value: 2500 });
      t.match(num.json, { goal_type: 'numeric', target_value: 10000, current_value: 2500, unit: 'steps' });
      await s.req(`${BASE}/${bool.json.id}`, { method: 'DELETE', headers: rw });
      await s.req(`${BASE}/${num.json.id}`, { method: 'DELETE', headers: rw });
    });

    await t.test('bad input writes nothing', async (t) => {
      const before = (await s.service.services.store.knex('goals')).length;
      const cases: [unknown, (string | number)[]][] = [
        [{ title: '', target_value: 1 }, ['body', 'title']],
        [{ title: 'x'.repeat(501), target_value: 1 }, ['body', 'title']],
        [{ title: 'x' }, ['body', 'target_value']],
        [{ title: 'x', target_value: 'ten' }, ['body', 'target_value']],
        [{ title: 'x', target_value: 1, goal_type: 'daily' }, ['body', 'goal_type']],
        [{ title: 'x', goal_type: 'boolean', target_value: 2 }, ['body', 'target_value']],
        [{ title: 'x', goal_type: 'boolean', target_value: 1, current_value: 0.5 }, ['body', 'current_value']],
        [{ title: 'x', goal_type: 'boolean', target_value: 1, max_value: 10 }, ['body', 'max_value']],
        [{ title: 'x', target_value: 11 }, ['body', 'target_value']],
        [{ title: 'x', target_value: 5, current_value: -1 }, ['body', 'current_value']],
        [{ title: 'x', target_value: 5, min_value: 6, max_value: 4 }, ['body', 'max_value']],
        [{ title: 'x', goal_type: 'numeric', target_value: 5, min_value: 6, max_value: 4 }, ['body', 'max_value']],
      ];
      for (const [body, loc] of cases) {
        const r = await create(body);
        t.equal(r.status, 422, JSON.stringify(body).slice(0, 80));
        t.same(r.json.detail[0].loc, loc);
      }
      t.equal((await create({ title: 'y'.repeat(500), target_value: 1 })).status, 200, '500 characters is allowed');
      await s.service.services.store.knex('goals').where({ title: 'y'.repeat(500) }).delete();
      t.equal((await s.service.services.store.knex('goals')).length, before);
    });

    const ids: string[] = [];
    await t.test('at most 3 active: a fourth deactivates the oldest', async (t) => {
      ids.push(sleepId);
      for (const title of ['Read', 'Run']) {
        s.clock.advance(1000);
        ids.push((await create({ title, target_value: 5 })).json.id);
      }
      const three = await s.req(BASE, { headers: ro });
      t.same(three.json.map((g: { id: string }) => g.id), ids, 'active goals oldest first');
      s.clock.advance(1000);
      const fourth = await create({ title: 'Cook', target_value: 3 });
      t.equal(fourth.status, 200, 'no error');
      t.equal(fourth.json.is_active, true);
      ids.push(fourth.json.id);
      const active = await s.req(BASE, { headers: ro });
      t.same(active.json.map((g: { id: string }) => g.id), ids.slice(1), 'the oldest left the active list');
      t.match(await goalRow(s, sleepId), { ended_at: iso(s), updated_at: iso(s) });
      t.notOk((await s.req(`${BASE}/${sleepId}`, { headers: ro })).json.is_active, 'still readable, inactive');

      const all = await s.req(`${BASE}?include_inactive=true&limit=1`, { headers: ro });
      t.same(all.json.map((g: { id: string }) => g.id), [...ids].reverse(), 'every goal newest first, limit ignored');
      t.same(all.json.map((g: { is_active: boolean }) => g.is_active), [true, true, true, false]);
      const limited = await s.req(`${BASE}?limit=2`, { headers: ro });
      t.same(limited.json.map((g: { id: string }) => g.id), ids.slice(1, 3));
      t.same((await s.req(BASE, { headers: bob })).json, [], 'per user');
      for (const q of ['limit=0', 'include_inactive=perhaps']) t.equal((await s.req(`${BASE}?${q}`, { headers: ro })).status, 422, q);
      const activeRows = await s.service.services.store.knex('goals').where({ user_id: 'alice', is_active: true });
      t.equal(activeRows.length, 3);
    });

    await t.test('concurrent creates never leave more than 3 active', async (t) => {
      const carol = bearer(await s.devKey('carol', ['goals:read', 'goals:write']));
      const results = await Promise.all(Array.from({ length: 6 }, (_, i) => create({ title: `g${i}`, target_value: 1 }, carol)));
      t.same(results.map((r) => r.status), [200, 200, 200, 200, 200, 200]);
      const active = await s.service.services.store.knex('goals').where({ user_id: 'carol', is_active: true });
      t.equal(active.length, 3);
      t.equal((await s.req(BASE, { headers: carol })).json.length, 3);
    });

    await t.test('update writes no history', async (t) => {
      const id = ids[1]!;
      s.clock.advance(1000);
      const res = await s.req(`${BASE}/${id}`, { method: 'PATCH', headers: rw, body: { title: 'Read books', current_value: 2, unit: 'books' } });
      t.equal(res.status, 200);
      t.match(res.json, { id, title: 'Read books', current_value: 2, unit: 'books', target_value: 5, updated_at: iso(s) });
      t.match(await goalRow(s, id), { title: 'Read books', current_value: 2, unit: 'books' });
      t.same(await historyRows(s, id), [], 'no history from PATCH');
      const cleared = await s.req(`${BASE}/${id}`, { method: 'PATCH', headers: rw, body: { unit: null } });
      t.equal(cleared.json.unit, null);

      t.equal((await s.req(`${BASE}/${id}`, { method: 'PATCH', headers: rw, body: {} })).status, 422, 'no field');
      t.equal((await s.req(`${BASE}/${id}`, { method: 'PATCH', headers: rw, body: { goal_type: 'numeric' } })).status, 422, 'goal_type is not updatable');
      const outOfRange = await s.req(`${BASE}/${id}`, { method: 'PATCH', headers: rw, body: { max_value: 4 } });
      t.equal(outOfRange.status, 422, 'the merged values must follow the rules');
      t.match(outOfRange.json.detail[0], { loc: ['body', 'target_value'], type: 'value_error' });
      const unknown = await s.req(`${BASE}/goal_000000000000`, { method: 'PATCH', headers: rw, body: { title: 'x' } });
      t.equal(unknown.status, 404);
      t.same(unknown.json, { detail: 'Goal not found' });
      t.equal((await s.req(`${BASE}/${id}`, { method: 'PATCH', headers: bob, body: { title: 'x' } })).status, 404, "another user's goal");
      t.equal((await goalRow(s, id))?.title, 'Read books');
    });

    await t.test('progress: one history entry per UTC day, last value wins', async (t) => {
      const id = ids[2]!;
      s.clock.set(Date.UTC(2026, 10, 24, 9, 0, 0));
      const p1 = await s.req(`${BASE}/${id}/progress?current_value=1`, { method: 'PATCH', headers: rw });
      t.equal(p1.status, 200);
      t.match(p1.json, { id, current_value: 1, updated_at: iso(s) });
      s.clock.advance(14 * HOUR); // 23:00 UTC, same day
      const lastOfDay = iso(s);
      await s.req(`${BASE}/${id}/progress?current_value=2.5`, { method: 'PATCH', headers: rw });
      s.clock.advance(2 * HOUR); // 01:00 UTC the next day
      await s.req(`${BASE}/${id}/progress?current_value=4`, { method: 'PATCH', headers: rw });
      t.same(
        (await historyRows(s, id)).map((r) => [r.date, Number(r.value)]),
        [['2026-11-24', 2.5], ['2026-11-25', 4]],
      );
      t.equal((await goalRow(s, id))?.current_value, 4);

      const hist = await s.req(`${BASE}/${id}/history`, { headers: ro });
      t.equal(hist.status, 200);
      t.same(hist.json, [
        { date: '2026-11-25', value: 4, recorded_at: iso(s) },
        { date: '2026-11-24', value: 2.5, recorded_at: lastOfDay },
      ], 'newest first');
      t.same((await s.req(`${BASE}/${id}/history?days=1`, { headers: ro })).json.map((e: { date: string }) => e.date), ['2026-11-25'], 'days=1 is today only');
      t.equal((await s.req(`${BASE}/${id}/history?days=2`, { headers: ro })).json.length, 2);

      s.clock.advance(40 * 24 * HOUR);
      t.same((await s.req(`${BASE}/${id}/history`, { headers: ro })).json, [], 'older than 30 days: gone from the default window');
      t.equal((await s.req(`${BASE}/${id}/history?days=365`, { headers: ro })).json.length, 2);
      for (const q of ['days=0', 'days=366', 'days=x']) {
        const r = await s.req(`${BASE}/${id}/history?${q}`, { headers: ro });
        t.equal(r.status, 422, q);
        t.equal(r.json.detail[0].loc[0], 'query');
      }

      const missing = await s.req(`${BASE}/${id}/progress`, { method: 'PATCH', headers: rw });
      t.equal(missing.status, 422);
      t.match(missing.json.detail[0], { loc: ['query', 'current_value'], type: 'missing' });
      const notNumber = await s.req(`${BASE}/${id}/progress?current_value=lots`, { method: 'PATCH', headers: rw });
      t.equal(notNumber.status, 422);
      const outOfScale = await s.req(`${BASE}/${id}/progress?current_value=11`, { method: 'PATCH', headers: rw });
      t.equal(outOfScale.status, 422, 'a scale goal stays within min..max');
      t.match(outOfScale.json.detail[0], { loc: ['query', 'current_value'] });
      t.equal((await historyRows(s, id)).length, 2, 'refused progress writes nothing');

      t.equal((await s.req(`${BASE}/nope/progress?current_value=1`, { method: 'PATCH', headers: rw })).status, 404);
      t.equal((await s.req(`${BASE}/${id}/progress?current_value=1`, { method: 'PATCH', headers: bob })).status, 404, "another user's goal");
      t.equal((await s.req(`${BASE}/${id}/history`, { headers: bob })).status, 404);
      t.same((await s.req(`${BASE}/nope/history`, { headers: ro })).json, { detail: 'Goal not found' });

      const boolGoal = await create({ title: 'Floss', goal_type: 'boolean', target_value: 1 });
      t.equal((await s.req(`${BASE}/${boolGoal.json.id}/progress?current_value=1`, { method: 'PATCH', headers: rw })).status, 200);
      t.equal((await s.req(`${BASE}/${boolGoal.json.id}/progress?current_value=0.5`, { method: 'PATCH', headers: rw })).status, 422, 'boolean goals take 0 or 1');
      const numGoal = await create({ title: 'Steps', goal_type: 'numeric', target_value: 10000 });
      t.equal((await s.req(`${BASE}/${numGoal.json.id}/progress?current_value=12345`, { method: 'PATCH', headers: rw })).status, 200, 'numeric goals are unbounded');
      t.equal((await s.req(`${BASE}/${sleepId}/progress?current_value=7`, { method: 'PATCH', headers: rw })).status, 200, 'inactive goals still take progress');
    });

    await t.test('delete removes the goal and its history', async (t) => {
      const id = ids[2]!;
      t.equal((await s.req(`${BASE}/${id}`, { method: 'DELETE', headers: bob })).status, 404);
      const res = await s.req(`${BASE}/${id}`, { method: 'DELETE', headers: rw });
      t.equal(res.status, 200);
      t.same(res.json, { success: true });
      t.equal(await goalRow(s, id), undefined);
      t.same(await historyRows(s, id), []);
      t.same((await s.req(`${BASE}/${id}`, { headers: ro })).json, { detail: 'Goal not found' });
      t.equal((await s.req(`${BASE}/${id}`, { method: 'DELETE', headers: rw })).status, 404);
    });

    await t.test('keys and scopes', async (t) => {
      const before = (await s.service.services.store.knex('goals')).length;
      t.equal((await s.req(BASE)).status, 401);
      const wrong = await s.req(`${BASE}/${sleepId}`, { headers: bearer(await s.devKey('alice', ['memories:read'])) });
      t.equal(wrong.status, 403);
      t.same(wrong.json, { detail: 'Insufficient permissions. Required scope: goals:read' });
      t.equal((await s.req(`${BASE}/${sleepId}/history`, { headers: bearer(await s.devKey('alice', ['goals:write'])) })).status, 403);
      for (const [method, path, body] of [
        ['POST', BASE, { title: 'x', target_value: 1 }],
        ['PATCH', `${BASE}/${sleepId}`, { title: 'x' }],
        ['PATCH', `${BASE}/${sleepId}/progress?current_value=1`, undefined],
        ['DELETE', `${BASE}/${sleepId}`, undefined],
      ] as const) {
        const r = await s.req(path, { method, headers: ro, ...(body ? { body } : {}) });
        t.equal(r.status, 403, `${method} ${path}`);
        t.same(r.json, { detail: 'Insufficient permissions. Required scope: goals:write' });
        t.equal((await s.req(path, { method, ...(body ? { body } : {}) })).status, 401, `${method} ${path} without a key`);
      }
      t.equal((await s.service.services.store.knex('goals')).length, before);
      t.match(await goalRow(s, sleepId), { title: 'Sleep well' });
    });
  });
}
