// Malformed bodies on a sample of write routes (broken JSON, wrong types, unknown enumeration values, huge strings,
// nested junk, valid bodies with a field spoiled): every answer is a documented status with the documented error
// shape, a refused write leaves every table as it was, and the process stays up.
import t from 'tap';
import fc from 'fast-check';
import { startService } from '../../helpers/service.js';
import { bearer } from '../../helpers/http.js';
import { check } from '../../helpers/fuzz.js';

const RUNS = 5000;
const ts = await startService(t, { env: { RATE_LIMIT_PER_MINUTE: '10000000', RATE_LIMIT_PER_DAY: '1000000000' } });
const scopes = ['conversations', 'memories', 'action_items', 'goals'].flatMap((s) => [`${s}:read`, `${s}:write`]);
const devKey = bearer(await ts.devKey('u1', scopes));
const idToken = bearer(await ts.token('u1'));
const made = async (path: string, body: unknown, headers = devKey): Promise<string> => {
  const r = await ts.req(path, { method: 'POST', headers, body });
  if (r.status !== 200) throw new Error(`setup ${path}: ${r.status} ${r.text}`);
  return r.json.id as string;
};
const memoryId = await made('/v1/dev/user/memories', { content: 'A memory to patch.' });
const actionId = await made('/v1/dev/user/action-items', { description: 'An action item to patch.' });
const goalId = await made('/v1/dev/user/goals', { title: 'A goal to patch.', target_value: 10 });

/** Rows per table of the service's sqlite store. */
const knex = ts.service.services.store.knex;
const tables: string[] = (await knex.raw("select name from sqlite_master where type = 'table' and name not like 'sqlite_%' and name not like 'knex_%'")).map((r: { name: string }) => r.name);
const countSql = `select ${tables.map((n) => `(select count(*) from "${n}") as "${n}"`).join(', ')}`;
const rows = async (): Promise<Record<string, number>> => (await knex.raw(countSql))[0];

const junk = fc.anything({ maxDepth: 4, withBigInt: false, withMap: false, withSet: false, withBoxedValues: false, withTypedArray: false, withSparseArray: false, withNullPrototype: false });
// Mostly long but within MAX_BODY_BYTES (1 MiB); now and then past it (413).
const huge = fc.oneof({ arbitrary: fc.integer({ min: 5_000, max: 70_000 }), weight: 9 }, { arbitrary: fc.integer({ min: 1_050_000, max: 1_100_000 }), weight: 1 }).map((n) => 'x'.repeat(n));
const value = (valid: fc.Arbitrary<unknown>): fc.Arbitrary<unknown> => fc.oneof({ arbitrary: valid, weight: 12 }, { arbitrary: junk, weight: 4 }, { arbitrary: fc.string(), weight: 2 }, { arbitrary: huge, weight: 1 });
const when = fc.date({ min: new Date('1900-01-01'), max: new Date('2200-01-01'), noInvalidDate: true }).map((d) => d.toISOString());
const CATEGORIES = ['interesting', 'system', 'manual', 'other', 'core', 'hobbies', 'lifestyle', 'work'];

interface Route {
  method: string;
  path: string;
  headers: Record<string, string>;
  body: fc.Arbitrary<Record<string, unknown>>;
}
const memory = fc.record({ content: value(fc.string({ maxLength: 200 })), category: value(fc.constantFrom(...CATEGORIES)), visibility: value(fc.constantFrom('private', 'public')), tags: value(fc.array(fc.string({ maxLength: 20 }), { maxLength: 4 })) }, { requiredKeys: [] });
const action = fc.record({ description: value(fc.string({ maxLength: 200 })), completed: value(fc.boolean()), due_at: value(when), conversation_id: value(fc.uuid()) }, { requiredKeys: [] });
const goal = fc.record({ title: value(fc.string({ maxLength: 100 })), goal_type: value(fc.constantFrom('boolean', 'scale', 'numeric')), target_value: value(fc.double()), current_value: value(fc.double()), min_value: value(fc.double()), max_value: value(fc.double()), unit: value(fc.string({ maxLength: 10 })) }, { requiredKeys: [] });
const ROUTES: Route[] = [
  { method: 'POST', path: '/v1/dev/user/memories', headers: devKey, body: memory },
  { method: 'POST', path: '/v1/dev/user/memories/batch', headers: devKey, body: fc.record({ memories: value(fc.array(memory, { maxLength: 4 })) }, { requiredKeys: [] }) },
  { method: 'PATCH', path: `/v1/dev/user/memories/${memoryId}`, headers: devKey, body: memory },
  { method: 'POST', path: '/v1/dev/user/action-items', headers: devKey, body: action },
  { method: 'PATCH', path: `/v1/dev/user/action-items/${actionId}`, headers: devKey, body: action },
  { method: 'POST', path: '/v1/dev/user/goals', headers: devKey, body: goal },
  { method: 'PATCH', path: `/v1/dev/user/goals/${goalId}`, headers: devKey, body: goal },
  { method: 'POST', path: '/v1/folders', headers: idToken, body: fc.record({ name: value(fc.string({ maxLength: 60 })), description: value(fc.string()) }, { requiredKeys: [] }) },
  { method: 'POST', path: '/v1/dev/keys', headers: idToken, body: fc.record({ name: value(fc.string({ maxLength: 60 })), scopes: value(fc.array(fc.constantFrom(...scopes, 'admin', 'memories:delete'), { maxLength: 4 })) }, { requiredKeys: [] }) },
  { method: 'PATCH', path: '/v1/users/settings', headers: idToken, body: fc.record({ name: value(fc.string({ maxLength: 60 })), time_zone: value(fc.constantFrom('Europe/Lisbon', 'UTC', 'Mars/Olympus')), language: value(fc.constantFrom('en', 'pt-BR', '')), daily_summary_enabled: value(fc.boolean()) }, { requiredKeys: [] }) },
];

/** What a body may be sent as: the generated object, or text that is not it. */
const payload = (body: fc.Arbitrary<Record<string, unknown>>): fc.Arbitrary<string> =>
  fc.oneof(
    { arbitrary: body.map((b) => JSON.stringify(b)), weight: 6 },
    { arbitrary: fc.tuple(body.map((b) => JSON.stringify(b)), fc.nat(), fc.nat()).map(([s, a, b]) => s.slice(0, a % (s.length + 1)) + s.slice((a % (s.length + 1)) + 1 + (b % 3))), weight: 2 },
    { arbitrary: junk.map((v) => JSON.stringify(v) ?? ''), weight: 2 },
    { arbitrary: fc.string({ unit: 'binary', maxLength: 200 }), weight: 1 },
  );

/** Documented statuses (docs/errors.md) a write route may answer a client's body with. */
const DOCUMENTED = new Set([200, 201, 204, 400, 404, 409, 413, 422]);

t.test(`${RUNS} malformed bodies on ${ROUTES.length} write routes: documented answers, nothing written when refused`, async (t) => {
  // Rows as they stand: taken again after each accepted write, compared after each refused one.
  let baseline = await rows();
  const cases = fc.integer({ min: 0, max: ROUTES.length - 1 }).chain((i) => payload(ROUTES[i]!.body).map((text) => ({ route: ROUTES[i]!, text })));
  await check(t, 'REST write bodies', fc.asyncProperty(cases, async ({ route, text }) => {
    const before = baseline;
    const res = await ts.req(route.path, { method: route.method, headers: { ...route.headers, 'content-type': 'application/json' }, body: Buffer.from(text) });
    if (!DOCUMENTED.has(res.status)) throw new Error(`${route.method} ${route.path} answered ${res.status} ${res.text.slice(0, 200)}`);
    if (res.status < 400) baseline = await rows();
    else {
      if (typeof res.headers['x-error-code'] !== 'string' || res.json === undefined || !('detail' in res.json)) throw new Error(`${res.status} without the error shape: ${res.text.slice(0, 200)}`);
      const after = await rows();
      for (const n of tables) if (after[n] !== before[n]) throw new Error(`${route.method} ${route.path} refused with ${res.status} but ${n} went from ${before[n]} to ${after[n]}`);
    }
    return true;
  }), RUNS);
  t.equal((await ts.req('/health')).status, 200, 'the node is alive');
});
