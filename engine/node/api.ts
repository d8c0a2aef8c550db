// The API node: the HTTP adapter with every REST route, the MCP endpoint and the OpenAPI document. Every role serves it.
import type client from 'prom-client';
import { HttpAdapter, type Route } from '../../http/adapter.js';
import { allRoutes } from '../../http/routes/index.js';
import { openApiRoute } from '../../http/routes/openapi.js';
import type { Services } from '../services.js';
import type { Principal } from '../identity/authenticator.js';
import { authenticate } from '../identity/authenticate.js';
import { RateLimiter } from '../identity/rate-limit.js';
import type { DataVersions } from '../cache/data-versions.js';

export interface ApiNodeOptions {
  readonly services: Services;
  readonly registry: client.Registry;
  readonly versions: DataVersions;
  /** Routes added after the built-in ones (tests and embedders). */
  readonly extraRoutes?: (services: Services) => Route<Principal>[];
}

/** Builds the HTTP adapter and adds the routes; the caller attaches /v4/listen (a listen role), seals it and listens. */
export function createApiNode(o: ApiNodeOptions): HttpAdapter<Principal> {
  const { services: s } = o;
  const { config } = s;
  const limiter = new RateLimiter({ redis: s.redis, clock: s.clock, prefix: config.redisPrefix, perMinute: config.rateLimitPerMinute, perDay: config.rateLimitPerDay, versions: o.versions });
  const http = new HttpAdapter<Principal>({
    logger: s.logger,
    registry: o.registry,
    maxBodyBytes: config.maxBodyBytes,
    responseCacheBytes: config.responseCacheBytes,
    authenticate: (spec, headers, route, remoteAddress) => authenticate(s.authenticator, limiter, spec, headers, route.path, remoteAddress),
  });
  for (const route of [...allRoutes(s), ...(o.extraRoutes?.(s) ?? [])]) http.add(route);
  http.add(openApiRoute(() => http.routes as readonly Route<unknown>[]));
  return http;
}
