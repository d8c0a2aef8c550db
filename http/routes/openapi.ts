// GET /v1/dev/openapi.json: the document built from every route the router serves, computed once.
import type { Route } from '../adapter.js';
import { buildOpenApi } from '../openapi.js';
import type { AppRoute } from './types.js';

export function openApiRoute(routes: () => readonly Route<unknown>[]): AppRoute {
  let text: string | undefined;
  return {
    method: 'get',
    path: '/v1/dev/openapi.json',
    operationId: 'openapi',
    summary: 'This document (OpenAPI 3.1)',
    tags: ['meta'],
    auth: { kind: 'none' },
    handler() {
      text ??= JSON.stringify(buildOpenApi(routes()));
      return { text, contentType: 'application/json' };
    },
  };
}
