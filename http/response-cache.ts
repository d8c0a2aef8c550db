// Serialised answers of `cacheable` routes, kept per caller, path and query and reused while the caller's data version stands.
import client from 'prom-client';
import { VersionedCache } from '../engine/cache/versioned-cache.js';

/** What a miss gives back: where to keep the answer about to be computed, and the version it is computed at. */
export interface Ticket {
  readonly key: string;
  readonly token: string;
}

/** A kept answer: its serialised JSON body and the route's own headers (paging), if any. */
export interface KeptAnswer {
  readonly body: Buffer;
  readonly headers: Readonly<Record<string, string>> | undefined;
}

export class ResponseCache {
  readonly #answers: VersionedCache<KeptAnswer> | undefined;
  readonly #lookups: client.Counter<'result'>;

  /** @param maxBytes - bytes of answers kept (keys count too); 0 keeps none */
  constructor(maxBytes: number, registry: client.Registry) {
    this.#answers = maxBytes > 0 ? new VersionedCache<KeptAnswer>(maxBytes) : undefined;
    this.#lookups = new client.Counter({
      name: 'http_response_cache_lookups_total',
      help: 'Requests to cacheable routes, by result: hit (answer reused), miss (computed and kept), bypass (data version unknown or changing).',
      labelNames: ['result'],
      registers: [registry],
    });
  }

  /**
   * The kept answer, or on a miss a ticket to keep the one about to be computed; undefined when nothing may be reused
   * (no cache, or the caller's version is unknown because a write of their data is in flight).
   */
  lookup(version: { readonly owner: string; readonly token: string } | undefined, operationId: string, pathParams: readonly string[], rawQuery: string): KeptAnswer | Ticket | undefined {
    if (!this.#answers) return undefined;
    if (version === undefined) {
      this.#lookups.inc({ result: 'bypass' });
      return undefined;
    }
    const path = pathParams.length === 0 ? '' : JSON.stringify(pathParams);
    const key = `${version.owner.length}:${version.owner}\n${operationId}\n${path}\n${rawQuery}`;
    const hit = this.#answers.get(key, version.token);
    this.#lookups.inc({ result: hit === undefined ? 'miss' : 'hit' });
    return hit ?? { key, token: version.token };
  }

  keep(ticket: Ticket, body: Buffer, headers?: Readonly<Record<string, string>>): void {
    let size = body.length + ticket.key.length * 2;
    if (headers) for (const k in headers) size += (k.length + headers[k]!.length) * 2;
    this.#answers?.set(ticket.key, ticket.token, { body, headers }, size);
  }
}
