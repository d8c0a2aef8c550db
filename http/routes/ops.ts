// Operator routes: /health checks the store and Redis; /metrics is the Prometheus exposition.
import type { AppRoute, Services } from './types.js';

/** Longest a dependency check may take before it counts as failed, in milliseconds. */
const CHECK_TIMEOUT_MS = 2000;

async function check(fn: () => Promise<unknown>): Promise<'ok' | 'unavailable'> {
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([fn(), new Promise((_, reject) => (timer = setTimeout(() => reject(new Error('timeout')), CHECK_TIMEOUT_MS)))]);
    return 'ok';
  } catch {
    return 'unavailable';
  } finally {
    clearTimeout(timer);
  }
}

export function opsRoutes(s: Services): AppRoute[] {
  return [
    {
      method: 'get',
      path: '/health',
      operationId: 'health',
      summary: 'Liveness and dependency check',
      hidden: true,
      auth: { kind: 'none' },
      async handler() {
        const [store, redis] = await Promise.all([check(() => s.store.ping()), check(() => s.redis.ping())]);
        const ok = store === 'ok' && redis === 'ok';
        const checks = { store, redis };
        return ok
          ? { body: { status: 'ok', checks } }
          : { status: 503, body: { detail: 'Service Unavailable', status: 'unavailable', checks } };
      },
    },
    {
      method: 'get',
      path: '/metrics',
      operationId: 'metrics',
      summary: 'Prometheus metrics',
      hidden: true,
      auth: { kind: 'none' },
      async handler() {
        return { text: await s.registry.metrics(), contentType: s.registry.contentType };
      },
    },
  ];
}
