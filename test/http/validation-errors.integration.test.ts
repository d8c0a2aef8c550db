// A value outside an enumeration gets one FastAPI-style 422 issue naming every allowed value, nullable or not.
import t from 'tap';
import { startService } from '../helpers/service.js';
import { bearer } from '../helpers/http.js';
import { MEMORY_CATEGORIES } from '../../engine/db/memories.js';

/** pydantic v2's list of allowed values: 'a', 'b' or 'c'. */
const expected = (values: readonly string[]): string => `${values.slice(0, -1).map((v) => `'${v}'`).join(', ')} or '${values.at(-1)}'`;

t.test('one error per field, naming the allowed values', async (t) => {
  const s = await startService(t);
  const key = await s.devKey('ann', ['memories:write', 'conversations:write', 'goals:write', 'action_items:write']);
  const post = (path: string, body: unknown, method = 'POST') => s.req(path, { method, headers: bearer(key), body });

  const cat = await post('/v1/dev/user/memories', { content: 'x', category: 'interesting' });
  t.equal(cat.status, 422);
  t.same(cat.json, {
    detail: [{ loc: ['body', 'category'], msg: `Input should be ${expected(MEMORY_CATEGORIES)}`, type: 'enum', ctx: { expected: expected(MEMORY_CATEGORIES) } }],
  }, 'the nullable memory category: one issue, every category named');

  const nonString = await post('/v1/dev/user/memories', { content: 'x', category: 7 });
  t.same(nonString.json.detail.map((d: { type: string }) => d.type), ['enum'], 'a number is not a category either, one issue');

  const vis = await post('/v1/dev/user/memories', { content: 'x', visibility: 'friends' });
  t.same(vis.json.detail, [{ loc: ['body', 'visibility'], msg: "Input should be 'public' or 'private'", type: 'enum', ctx: { expected: "'public' or 'private'" } }]);

  const src = await post('/v1/dev/user/conversations', { text: 'hello there', text_source: 'email' });
  t.equal(src.status, 422);
  t.same(src.json.detail, [
    { loc: ['body', 'text_source'], msg: "Input should be 'audio_transcript', 'message' or 'other_text'", type: 'enum', ctx: { expected: "'audio_transcript', 'message' or 'other_text'" } },
  ]);

  const goal = await post('/v1/dev/user/goals', { title: 'run', target_value: 5, goal_type: 'percent' });
  t.same(goal.json.detail, [{ loc: ['body', 'goal_type'], msg: "Input should be 'boolean', 'scale' or 'numeric'", type: 'enum', ctx: { expected: "'boolean', 'scale' or 'numeric'" } }]);

  const batch = await post('/v1/dev/user/memories/batch', { memories: [{ content: 'ok' }, { content: 'x', category: 'nope', visibility: 'nope' }] });
  t.same(batch.json.detail.map((d: { loc: unknown[] }) => d.loc), [['body', 'memories', 1, 'category'], ['body', 'memories', 1, 'visibility']], 'one issue per bad field, in a batch too');

  const nullableString = await post('/v1/dev/user/conversations', { text: 'hello there', text_source_spec: 5 });
  t.same(nullableString.json.detail, [{ loc: ['body', 'text_source_spec'], msg: 'Input should be a valid string', type: 'string_type' }], 'a nullable string: no "should be null" issue beside it');

  const patch = await post('/v1/dev/user/memories/m1', { category: 'interesting' }, 'PATCH');
  t.same(patch.json.detail.map((d: { type: string }) => d.type), ['enum'], 'the PATCH body too');

  const key2 = await s.req('/v1/dev/keys', { method: 'POST', headers: bearer(await s.token('ann')), body: { name: 'k', key_type: 'admin' } });
  t.same(key2.json.detail, [{ loc: ['body', 'key_type'], msg: "Input should be 'dev' or 'mcp'", type: 'enum', ctx: { expected: "'dev' or 'mcp'" } }]);
});
