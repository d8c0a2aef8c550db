// The HTTP adapter the way FastAPI clients expect it: 404/405, 422 bodies, 413 unread, query coercion, no leaked internals.
import t from 'tap';
import { headOnly } from '../helpers/http.js';
import { Type } from '@sinclair/typebox';
import { startService } from '../helpers/service.js';
import type { AppRoute } from '../../http/routes/types.js';

let calls = 0;
const routes = (): AppRoute[] => [
  {
    method: 'post',
    path: '/echo/{name}',
    operationId: 'echo',
    summary: 'echo',
    auth: { kind: 'none' },
    query: Type.Object({ limit: Type.Integer({ minimum: 1, maximum: 100, default: 25 }), flag: Type.Boolean({ default: false }) }),
    body: Type.Object({
      text: Type.String({ minLength: 1, maxLength: 10 }),
      tags: Type.Optional(Type.Array(Type.String(), { maxItems: 2 })),
      kind: Type.Optional(Type.Union([Type.Literal('a'), Type.Literal('b')])),
      items: Type.Optional(Type.Array(Type.Object({ start: Type.Number({ minimum: 0 }) }))),
    }),
    handler: ({ params, query, body }) => {
      calls++;
      return { body: { params, query, body } };
    },
  },
  {
    method: 'get',
    path: '/boom',
    operationId: 'boom',
    summary: 'boom',
    auth: { kind: 'none' },
    handler: () => {
      throw new Error('secret transcript text that must not leak');
    },
  },
];

t.test('adapter', async (t) => {
  const s = await startService(t, { extraRoutes: routes, env: { MAX_BODY_BYTES: '1024' } });

  t.test('a valid request gets params, coerced query and defaults', async (t) => {
    const res = await s.req('/echo/hello%20world?limit=7&flag=yes', { method: 'POST', body: { text: 'hi' } });
    t.equal(res.status, 200);
    t.same(res.json, { params: { name: 'hello world' }, query: { limit: 7, flag: true }, body: { text: 'hi' } });
    const defaults = await s.req('/echo/x', { method: 'POST', body: { text: 'hi' } });
    t.same(defaults.json.query, { limit: 25, flag: false });
  });

  t.test('unknown routes and methods', async (t) => {
    const nf = await s.req('/nowhere');
    t.equal(nf.status, 404);
    t.same(nf.json, { detail: 'Not Found' });
    const legacy = await s.req('/v1/memories');
    t.equal(legacy.status, 404);
    const na = await s.req('/echo/x', { method: 'GET' });
    t.equal(na.status, 405);
    t.same(na.json, { detail: 'Method Not Allowed' });
  });

  t.test('validation failures answer 422 in FastAPI shape and never reach the handler', async (t) => {
    const before = calls;
    const cases: [string, unknown, unknown][] = [
      ['/echo/x', {}, [{ loc: ['body', 'text'], msg: 'Field required', type: 'missing' }]],
      ['/echo/x', { text: 5 }, [{ loc: ['body', 'text'], msg: 'Input should be a valid string', type: 'string_type' }]],
      ['/echo/x', { text: '' }, [{ loc: ['body', 'text'], type: 'string_too_short' }]],
      ['/echo/x', { text: 'x'.repeat(11) }, [{ loc: ['body', 'text'], type: 'string_too_long' }]],
      ['/echo/x', { text: 'a', tags: ['1', '2', '3'] }, [{ loc: ['body', 'tags'], type: 'too_long' }]],
      ['/echo/x', { text: 'a', tags: 'x' }, [{ loc: ['body', 'tags'], type: 'list_type' }]],
      ['/echo/x', { text: 'a', items: [{ start: 0 }, { start: -1 }] }, [{ loc: ['body', 'items', 1, 'start'], type: 'greater_than_equal' }]],
      ['/echo/x', [1, 2], [{ loc: ['body'], type: 'model_attributes_type' }]],
      ['/echo/x?limit=0', { text: 'a' }, [{ loc: ['query', 'limit'], type: 'greater_than_equal' }]],
      ['/echo/x?limit=ten', { text: 'a' }, [{ loc: ['query', 'limit'], type: 'int_parsing' }]],
      ['/echo/x?flag=maybe', { text: 'a' }, [{ loc: ['query', 'flag'], type: 'bool_parsing' }]],
    ];
    for (const [path, body, detail] of cases) {
      const res = await s.req(path, { method: 'POST', body });
      t.equal(res.status, 422, `${path} ${JSON.stringify(body)}`);
      t.match(res.json, { detail }, `${path} ${JSON.stringify(body)}`);
      t.equal(res.headers['x-error-code'], 'ENG_ERR_HTTP_VALIDATION');
    }
    const kind = await s.req('/echo/x', { method: 'POST', body: { text: 'a', kind: 'c' } });
    t.equal(kind.status, 422);
    t.ok(kind.json.detail.every((d: { loc: unknown[] }) => d.loc[1] === 'kind'), 'an enum failure points at its field');
    const two = await s.req('/echo/x', { method: 'POST', body: { text: 5, tags: 'x' } });
    t.equal(two.json.detail.length, 2, 'every failing field is reported');
    t.equal(calls, before, 'the handler never ran');
  });

  t.test('malformed JSON and empty bodies', async (t) => {
    const bad = await s.req('/echo/x', { method: 'POST', body: '{"text": "a",' });
    t.equal(bad.status, 422);
    t.match(bad.json.detail[0], { loc: ['body', Number], msg: 'JSON decode error', type: 'json_invalid' });
    const empty = await s.req('/echo/x', { method: 'POST' });
    t.equal(empty.status, 422);
    t.same(empty.json.detail, [{ loc: ['body'], msg: 'Field required', type: 'missing' }]);
  });

  t.test('oversized bodies answer 413 without being read', async (t) => {
    const declared = await s.req('/echo/x', { method: 'POST', body: JSON.stringify({ text: 'x'.repeat(2000) }) });
    t.equal(declared.status, 413);
    t.equal(declared.headers['x-error-code'], 'ENG_ERR_HTTP_BODY_TOO_LARGE');
    const chunked = await s.req('/echo/x', { method: 'POST', body: JSON.stringify({ text: 'x'.repeat(2000) }), chunked: true });
    t.equal(chunked.status, 413, 'also without a content-length');

    // A client that declares 100 MB and sends only the headers still gets its answer at once.
    const answer = await headOnly(s.service.port, 'POST /echo/x HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 104857600');
    t.match(answer, /^HTTP\/1\.1 413 /);
  });

  t.test('an unexpected failure is a bare 500 that leaks nothing', async (t) => {
    const res = await s.req('/boom');
    t.equal(res.status, 500);
    t.same(res.json, { detail: 'Internal Server Error' });
    t.notOk(res.text.includes('secret'));
  });

  t.test('the service still answers after all that', async (t) => {
    t.equal((await s.req('/health')).status, 200);
  });
});
