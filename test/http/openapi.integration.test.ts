// The OpenAPI document is served, is 3.1 with version 1.0.0, and lists exactly the routes the router serves.
import t from 'tap';
import { startService } from '../helpers/service.js';

t.test('openapi document', async (t) => {
  const s = await startService(t);
  const res = await s.req('/v1/dev/openapi.json');
  t.equal(res.status, 200);
  t.match(res.headers['content-type'], /application\/json/);
  const doc = res.json;
  t.equal(doc.openapi, '3.1.0');
  t.equal(doc.info.version, '1.0.0');

  const served = new Set(s.service.http.routes.filter((r) => !r.hidden).map((r) => `${r.method.toUpperCase()} ${r.path}`));
  const documented = new Set<string>();
  for (const [path, ops] of Object.entries(doc.paths as Record<string, Record<string, unknown>>)) {
    for (const method of Object.keys(ops)) documented.add(`${method.toUpperCase()} ${path}`);
  }
  t.same([...documented].sort(), [...served].sort(), 'every served route is documented, and nothing else');
  t.notOk(documented.has('GET /health'), 'operator routes stay out');

  const ids = new Set<string>();
  for (const route of s.service.http.routes.filter((r) => !r.hidden)) {
    const op = doc.paths[route.path][route.method];
    t.ok(op.operationId && !ids.has(op.operationId), `${route.operationId}: unique operationId`);
    ids.add(op.operationId);
    t.ok(op.summary, `${route.operationId}: summary`);
    t.ok(op.responses, `${route.operationId}: responses`);
    if (route.auth.kind === 'api_key') {
      t.equal(op['x-required-scope'], route.auth.scope, `${route.operationId}: scope listed`);
      t.ok(op.responses['403'], `${route.operationId}: 403 documented`);
    }
    if (route.body) t.ok(op.requestBody.content['application/json'].schema.type, `${route.operationId}: request schema`);
    for (const m of route.path.matchAll(/\{(\w+)\}/g)) {
      t.ok(op.parameters.some((p: { name: string; in: string }) => p.name === m[1] && p.in === 'path'), `${route.operationId}: path parameter ${m[1]}`);
    }
  }
  t.ok(JSON.stringify(doc).indexOf('Symbol(') === -1, 'no TypeBox internals leak into the document');
});
