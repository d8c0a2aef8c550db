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
    const named = (schema: { $ref?: string }, what: string): void => {
      const name = schema.$ref?.replace('#/components/schemas/', '');
      t.ok(name && doc.components.schemas[name]?.description, `${route.operationId}: ${what} is a named schema with a description`);
    };
    if (route.body && !route.path.startsWith('/v1/mcp')) named(op.requestBody.content['application/json'].schema, 'request body');
    for (const [status, r] of Object.entries(op.responses as Record<string, { content?: Record<string, { schema: { $ref?: string } }> }>)) {
      if (r.content && !route.path.startsWith('/v1/mcp')) named(r.content['application/json']!.schema, `${status} answer`);
    }
    for (const p of op.parameters as { name: string; in: string; required: boolean; schema: { default?: unknown } }[]) {
      if (p.schema.default !== undefined) t.notOk(p.required, `${route.operationId}: ${p.name} has a default, so it is optional`);
    }
    for (const m of route.path.matchAll(/\{(\w+)\}/g)) {
      t.ok(op.parameters.some((p: { name: string; in: string }) => p.name === m[1] && p.in === 'path'), `${route.operationId}: path parameter ${m[1]}`);
    }
  }
  for (const name of ['Memory', 'ActionItem', 'Goal', 'Conversation', 'Folder', 'ApiKey', 'CreateMemory', 'MemoryList', 'ErrorResponse', 'HTTPValidationError']) {
    t.ok(doc.components.schemas[name], `component ${name}`);
  }
  const limit = doc.paths['/v1/dev/user/memories'].get.parameters.find((p: { name: string }) => p.name === 'limit');
  t.match(limit, { required: false, schema: { type: 'integer', minimum: 1, default: 25 } }, 'limit: optional, its default stated, no maximum');
  t.ok(JSON.stringify(doc).indexOf('Symbol(') === -1, 'no TypeBox internals leak into the document');
});
