// The OpenAPI 3.1 document, generated from the same route list and TypeBox schemas that validate requests.
import type { TSchema } from '@sinclair/typebox';
import type { Route } from './adapter.js';

/** Version of the machine-readable description; the compatible system publishes its developer API as 1.0.0. */
export const API_VERSION = '1.0.0';

/** TypeBox schemas carry symbols and TypeBox-only keys; a JSON round trip leaves plain JSON Schema. */
function plain(schema: TSchema): Record<string, unknown> {
  return JSON.parse(JSON.stringify(schema)) as Record<string, unknown>;
}

const ValidationErrorSchema = {
  type: 'object',
  required: ['loc', 'msg', 'type'],
  properties: {
    loc: { type: 'array', items: { anyOf: [{ type: 'string' }, { type: 'integer' }] } },
    msg: { type: 'string' },
    type: { type: 'string' },
  },
};

const ErrorResponse = {
  description: 'error; `detail` is a string, or an object with `code` and `message`; the stable code is in the `x-error-code` header',
  content: { 'application/json': { schema: { $ref: '#/components/schemas/ErrorResponse' } } },
};

function errorResponses(route: Route<unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  if (route.auth.kind !== 'none') out['401'] = ErrorResponse;
  if (route.auth.kind === 'api_key') out['403'] = { ...ErrorResponse, description: `the key lacks the scope \`${route.auth.scope}\`` };
  if (route.path.includes('{')) out['404'] = { ...ErrorResponse, description: 'not found, or not yours' };
  if (route.body || route.query || route.path.includes('{')) {
    out['422'] = { description: 'validation error', content: { 'application/json': { schema: { $ref: '#/components/schemas/HTTPValidationError' } } } };
  }
  if (route.path.startsWith('/v1/dev/') && route.auth.kind !== 'none') {
    out['429'] = { ...ErrorResponse, description: 'rate limit exceeded; see `Retry-After`' };
    out['503'] = { ...ErrorResponse, description: 'the rate limiter (Redis) is unreachable; retry later' };
  }
  return out;
}

function security(route: Route<unknown>): Record<string, string[]>[] | undefined {
  switch (route.auth.kind) {
    case 'none':
      return [];
    case 'id_token':
      return [{ IdToken: [] }];
    case 'api_key':
      return route.auth.alsoIdToken ? [{ ApiKey: [route.auth.scope] }, { IdToken: [] }] : [{ ApiKey: [route.auth.scope] }];
    case 'mcp_key':
      return [{ McpKey: [] }];
  }
}

function parameters(route: Route<unknown>): Record<string, unknown>[] {
  const params: Record<string, unknown>[] = [];
  for (const m of route.path.matchAll(/\{(\w+)\}/g)) params.push({ name: m[1], in: 'path', required: true, schema: { type: 'string' } });
  if (route.query) {
    const q = plain(route.query) as { properties?: Record<string, Record<string, unknown>>; required?: string[] };
    for (const [name, schema] of Object.entries(q.properties ?? {})) {
      const { description, ...rest } = schema;
      params.push({ name, in: 'query', required: q.required?.includes(name) ?? false, schema: rest, ...(description ? { description } : {}) });
    }
  }
  return params;
}

/** Builds the document from the routes the router serves; hidden routes (health, metrics) stay out. */
export function buildOpenApi(routes: readonly Route<unknown>[]): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const route of routes) {
    if (route.hidden) continue;
    const responses: Record<string, unknown> = {};
    for (const [status, r] of Object.entries(route.responses ?? { 200: { description: 'success' } })) {
      responses[status] = r.schema ? { description: r.description, content: { 'application/json': { schema: plain(r.schema) } } } : { description: r.description };
    }
    const op: Record<string, unknown> = {
      operationId: route.operationId,
      summary: route.summary,
      ...(route.description ? { description: route.description } : {}),
      ...(route.tags ? { tags: route.tags } : {}),
      security: security(route),
      parameters: parameters(route),
      responses: { ...responses, ...errorResponses(route) },
    };
    if (route.auth.kind === 'api_key') op['x-required-scope'] = route.auth.scope;
    if (route.body) op.requestBody = { required: true, content: { 'application/json': { schema: plain(route.body) } } };
    (paths[route.path] ??= {})[route.method] = op;
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'Wearable backend developer API',
      version: API_VERSION,
      description:
        'Developer REST interface for personal data. Authenticate with `Authorization: Bearer svc_dev_…` (scopes per operation in `x-required-scope`); ' +
        'key management and folder editing take the signed-in ID token. Rate limits: per key per minute and per user per UTC day, ' +
        'reported in `X-RateLimit-Limit`, `X-RateLimit-Remaining` and `X-RateLimit-Reset` (Unix seconds) on every /v1/dev answer; over a limit: 429 with `Retry-After`.',
    },
    servers: [{ url: '/' }],
    paths,
    components: {
      securitySchemes: {
        ApiKey: { type: 'http', scheme: 'bearer', description: 'developer API key (`svc_dev_…`); `svc_mcp_` keys are refused here' },
        IdToken: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT', description: 'ID token of the signed-in user' },
        McpKey: { type: 'http', scheme: 'bearer', description: 'assistant-protocol key (`svc_mcp_…`), accepted only by the MCP endpoints' },
      },
      schemas: {
        ErrorResponse: {
          type: 'object',
          required: ['detail'],
          properties: { detail: { anyOf: [{ type: 'string' }, { type: 'array' }, { type: 'object', properties: { code: { type: 'string' }, message: { type: 'string' } } }] } },
        },
        ValidationError: ValidationErrorSchema,
        HTTPValidationError: { type: 'object', properties: { detail: { type: 'array', items: { $ref: '#/components/schemas/ValidationError' } } } },
      },
    },
  };
}
