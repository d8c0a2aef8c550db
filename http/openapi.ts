// The OpenAPI 3.1 document, generated from the same route list and TypeBox schemas that validate requests.
import type { Route } from './adapter.js';

/** Version of the machine-readable description; the compatible system publishes its developer API as 1.0.0. */
export const API_VERSION = '1.0.0';

/** Keys whose values are data, not schemas: never searched for named schemas. */
const DATA_KEYS = new Set(['default', 'enum', 'const', 'examples', 'example']);

/**
 * The named component schemas of one document: a schema with a `title` (set where the TypeBox schema is defined) is
 * kept once under `#/components/schemas/<title>` and referenced everywhere it appears, so a generated client gets one
 * named type per resource, request body, list answer and error body.
 */
class Components {
  readonly schemas: Record<string, unknown> = {};
  readonly #built = new Map<string, string>();

  constructor(fixed: Record<string, unknown>) {
    for (const [name, schema] of Object.entries(fixed)) {
      this.schemas[name] = schema;
      this.#built.set(name, JSON.stringify(schema));
    }
  }

  /**
   * Plain JSON Schema of `schema` (TypeBox's symbols dropped), named parts replaced by references. In a request
   * (`request`), a property's default moves into its description: generators such as openapi-typescript read a
   * `default` in a shared schema as "always present" and would make the field required in the request type.
   */
  doc(schema: unknown, request = false): unknown {
    if (Array.isArray(schema)) return schema.map((x) => this.doc(x, request));
    if (schema === null || typeof schema !== 'object') return schema;
    const obj = schema as Record<string, unknown>;
    return typeof obj.title === 'string' ? this.#ref(obj.title, obj, request) : this.#copy(obj, request);
  }

  #copy(obj: Record<string, unknown>, request: boolean): Record<string, unknown> {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(obj)) {
      if (k === 'default' && request) continue;
      if (DATA_KEYS.has(k)) out[k] = JSON.parse(JSON.stringify(v)) as unknown;
      else if (k === 'properties' && v && typeof v === 'object') {
        out[k] = Object.fromEntries(Object.entries(v as Record<string, unknown>).map(([p, ps]) => [p, this.doc(ps, request)]));
      } else out[k] = this.doc(v, request);
    }
    if (request && obj.default !== undefined) {
      const said = `default: ${JSON.stringify(obj.default)}`;
      out.description = typeof obj.description === 'string' ? `${obj.description} (${said})` : said;
    }
    return out;
  }

  #ref(name: string, obj: Record<string, unknown>, request: boolean): Record<string, unknown> {
    const body = this.#copy(obj, request);
    const text = JSON.stringify(body);
    const known = this.#built.get(name);
    if (known === undefined) {
      this.#built.set(name, text);
      this.schemas[name] = body;
    } else if (known !== text) {
      throw new Error(`two different schemas are named ${name}`);
    }
    return { $ref: `#/components/schemas/${name}` };
  }
}

const ref = (name: string): Record<string, string> => ({ $ref: `#/components/schemas/${name}` });

/** The error bodies, in the compatible system's shapes. */
const ERROR_SCHEMAS = {
  ValidationError: {
    title: 'ValidationError',
    type: 'object',
    description: 'one problem with the request, as FastAPI reports it',
    required: ['loc', 'msg', 'type'],
    properties: {
      loc: { type: 'array', items: { anyOf: [{ type: 'string' }, { type: 'integer' }] }, description: 'where: "body", "query" or "path", then field names and list indexes' },
      msg: { type: 'string', description: 'what is wrong, for people' },
      type: { type: 'string', description: 'what is wrong, for programs (pydantic\'s error types: missing, enum, string_too_long, datetime_parsing, …)' },
      ctx: { type: 'object', additionalProperties: true, description: 'the rule broken, such as {"max_length": 500} or {"expected": "\'a\' or \'b\'"}' },
    },
  },
  HTTPValidationError: {
    title: 'HTTPValidationError',
    type: 'object',
    description: 'body of a 422: every problem found, one per field',
    required: ['detail'],
    properties: { detail: { type: 'array', items: ref('ValidationError') } },
  },
  StructuredErrorDetail: {
    title: 'StructuredErrorDetail',
    type: 'object',
    description: 'a `detail` object with a stable code, such as developer_memory_access_not_ready',
    required: ['code', 'message'],
    properties: { code: { type: 'string' }, message: { type: 'string' } },
    additionalProperties: true,
  },
  ErrorResponse: {
    title: 'ErrorResponse',
    type: 'object',
    description: 'body of every error other than 422; the stable error code is also in the `x-error-code` header',
    required: ['detail'],
    properties: { detail: { anyOf: [{ type: 'string' }, ref('StructuredErrorDetail'), { type: 'array', items: ref('ValidationError') }] } },
  },
};

const RATE_LIMIT_HEADERS = {
  'X-RateLimit-Limit': { description: 'requests allowed in the window that runs out first', schema: { type: 'integer' } },
  'X-RateLimit-Remaining': { description: 'requests left in that window', schema: { type: 'integer' } },
  'X-RateLimit-Reset': { description: 'when that window ends, in Unix seconds', schema: { type: 'integer' } },
};

const PAGING_HEADERS = {
  'X-Has-More': { description: '"true" when more items follow this page', schema: { type: 'string', enum: ['true', 'false'] } },
  Link: { description: 'with more items, `<url>; rel="next"`: the next page', schema: { type: 'string' } },
};

const errorBody = (description: string): Record<string, unknown> => ({ description, content: { 'application/json': { schema: ref('ErrorResponse') } } });

function errorResponses(route: Route<unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  if (route.auth.kind !== 'none') out['401'] = errorBody('missing or invalid credentials');
  if (route.auth.kind === 'api_key') out['403'] = errorBody(`the key lacks the scope \`${route.auth.scope}\``);
  if (route.path.includes('{')) out['404'] = errorBody('not found, or not yours');
  if (route.body || route.query || route.path.includes('{')) {
    out['422'] = { description: 'validation error', content: { 'application/json': { schema: ref('HTTPValidationError') } } };
  }
  if (route.path.startsWith('/v1/dev/') && route.auth.kind !== 'none') {
    out['429'] = errorBody('rate limit exceeded; see `Retry-After`');
    out['503'] = errorBody('the rate limiter (Redis) is unreachable; retry later');
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

function parameters(route: Route<unknown>, components: Components): Record<string, unknown>[] {
  const params: Record<string, unknown>[] = [];
  for (const m of route.path.matchAll(/\{(\w+)\}/g)) params.push({ name: m[1], in: 'path', required: true, schema: { type: 'string' } });
  if (route.query) {
    const q = route.query as { properties?: Record<string, Record<string, unknown>>; required?: string[] };
    for (const [name, schema] of Object.entries(q.properties ?? {})) {
      const { description, ...rest } = components.doc(schema) as Record<string, unknown>;
      // A parameter with a default may be left out, whatever the validating schema says.
      const required = (q.required?.includes(name) ?? false) && schema.default === undefined;
      params.push({ name, in: 'query', required, schema: rest, ...(description ? { description } : {}) });
    }
  }
  return params;
}

/** Builds the document from the routes the router serves; hidden routes (health, metrics) stay out. */
export function buildOpenApi(routes: readonly Route<unknown>[]): Record<string, unknown> {
  const components = new Components(ERROR_SCHEMAS);
  const paths: Record<string, Record<string, unknown>> = {};
  for (const route of routes) {
    if (route.hidden) continue;
    const limited = route.path.startsWith('/v1/dev/') && route.auth.kind !== 'none';
    const paged = (route.query as { properties?: Record<string, unknown> } | undefined)?.properties?.limit !== undefined;
    const responses: Record<string, unknown> = errorResponses(route);
    for (const [status, r] of Object.entries(route.responses ?? { 200: { description: 'success' } })) {
      const ok = Number(status) < 400;
      const headers = ok ? { ...(limited ? RATE_LIMIT_HEADERS : {}), ...(paged ? PAGING_HEADERS : {}) } : undefined;
      const content = r.schema
        ? { 'application/json': { schema: components.doc(r.schema) } }
        : ok ? undefined : { 'application/json': { schema: ref('ErrorResponse') } };
      responses[status] = { description: r.description, ...(headers && Object.keys(headers).length > 0 ? { headers } : {}), ...(content ? { content } : {}) };
    }
    const op: Record<string, unknown> = {
      operationId: route.operationId,
      summary: route.summary,
      ...(route.description ? { description: route.description } : {}),
      ...(route.tags ? { tags: route.tags } : {}),
      security: security(route),
      parameters: parameters(route, components),
      responses,
    };
    if (route.auth.kind === 'api_key') op['x-required-scope'] = route.auth.scope;
    if (route.body) op.requestBody = { required: true, content: { 'application/json': { schema: components.doc(route.body, true) } } };
    if (route.rawBody) {
      const content = Object.fromEntries(Object.entries(route.rawBody.content).map(([type, schema]) => [type, { schema: components.doc(schema, true) }]));
      op.requestBody = { required: true, description: route.rawBody.description, content };
    }
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
      schemas: components.schemas,
    },
  };
}
