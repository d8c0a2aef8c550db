// The one place bearer credentials are checked: ID tokens for the signed-in user, API keys (with scopes) for developers.
import type { Redis } from 'ioredis';
import type { Logger } from '../logger.js';
import type { Clock } from '../clock.js';
import { EngineError } from '../errors.js';
import type { ApiKeyRecord, ApiKeysRepository } from '../db/api-keys.js';
import type { KeyKind, Scope } from '../protocol.js';
import type { IdTokenVerifier } from './id-tokens.js';
import { hashKey, parseKey } from './key-format.js';

export interface Principal {
  readonly uid: string;
  readonly via: 'none' | 'id_token' | 'api_key';
  readonly keyId?: string;
  readonly scopes?: readonly Scope[];
}

interface CacheEntry {
  record: ApiKeyRecord;
  expiresAt: number;
  lastTouched: number;
}

const MAX_CACHED_KEYS = 10_000;

/** Extracts the credential of an `Authorization: Bearer <credential>` header; undefined when absent or not Bearer. */
export function bearer(header: string | undefined): string | undefined {
  if (!header) return undefined;
  const m = /^Bearer[ ]+(\S+)\s*$/i.exec(header);
  return m?.[1];
}

export interface AuthenticatorOptions {
  readonly verifier: IdTokenVerifier;
  readonly keys: ApiKeysRepository;
  readonly clock: Clock;
  readonly logger: Logger;
  /** Minimum interval between last_used_at writes per key, in milliseconds. */
  readonly lastUsedIntervalMs: number;
  /** Lifetime of a cached key lookup, in milliseconds. */
  readonly cacheTtlMs: number;
  /** Redis channel on which revocations are announced to every node. */
  readonly revocationChannel: string;
}

export class Authenticator {
  readonly #o: AuthenticatorOptions;
  readonly #cache = new Map<string, CacheEntry>();
  #publisher: Redis | undefined;
  #subscriber: Redis | undefined;

  constructor(opts: AuthenticatorOptions) {
    this.#o = opts;
  }

  /** Listens for revocations made on other nodes so their cached keys die at once here too. */
  async attach(publisher: Redis, subscriber: Redis): Promise<void> {
    this.#publisher = publisher;
    this.#subscriber = subscriber;
    subscriber.on('message', (channel: string, hash: string) => {
      if (channel === this.#o.revocationChannel) this.#cache.delete(hash);
    });
    await subscriber.subscribe(this.#o.revocationChannel);
  }

  /** Verifies an ID token from the Authorization header; 401 "Not authenticated" when there is none. */
  async idToken(header: string | undefined): Promise<Principal> {
    const token = bearer(header);
    if (!token) throw new EngineError('ENG_ERR_AUTH_NOT_AUTHENTICATED', {}, { headers: { 'www-authenticate': 'Bearer' } });
    return { uid: await this.#o.verifier.verify(token), via: 'id_token' };
  }

  /**
   * Checks a key of family `kind` carrying `scope`. With `alsoIdToken`, a credential that is not an API key
   * is tried as an ID token (a signed-in user holds every scope over their own data).
   */
  async apiKey(header: string | undefined, kind: KeyKind, scope: Scope | undefined, alsoIdToken = false): Promise<Principal> {
    const credential = bearer(header);
    if (!credential) throw new EngineError('ENG_ERR_AUTH_HEADER_MISSING');
    if (alsoIdToken && !credential.startsWith('svc_')) return { uid: await this.#o.verifier.verify(credential), via: 'id_token' };
    const family = parseKey(credential);
    if (family === undefined) throw new EngineError('ENG_ERR_AUTH_KEY_INVALID');
    if (family !== kind) throw new EngineError('ENG_ERR_AUTH_KEY_WRONG_KIND', { kind: family });
    const record = await this.#lookup(hashKey(credential));
    if (!record || record.kind !== kind) throw new EngineError('ENG_ERR_AUTH_KEY_INVALID');
    if (scope !== undefined && !record.scopes.includes(scope)) throw new EngineError('ENG_ERR_AUTH_SCOPE_MISSING', { scope });
    return { uid: record.userId, via: 'api_key', keyId: record.id, scopes: record.scopes };
  }

  /** Evicts a revoked key here and on every other node. */
  async revoked(hash: string): Promise<void> {
    this.#cache.delete(hash);
    if (this.#publisher) await this.#publisher.publish(this.#o.revocationChannel, hash);
  }

  async #lookup(hash: string): Promise<ApiKeyRecord | undefined> {
    const now = this.#o.clock.now();
    let entry = this.#cache.get(hash);
    if (!entry || entry.expiresAt <= now) {
      const record = await this.#o.keys.findByHash(hash);
      if (!record) {
        this.#cache.delete(hash);
        return undefined;
      }
      const lastTouched = record.lastUsedAt ? Date.parse(record.lastUsedAt) : 0;
      entry = { record, expiresAt: now + this.#o.cacheTtlMs, lastTouched };
      if (this.#cache.size >= MAX_CACHED_KEYS) this.#cache.delete(this.#cache.keys().next().value as string);
      this.#cache.set(hash, entry);
    }
    if (now - entry.lastTouched >= this.#o.lastUsedIntervalMs) {
      // At most one write per key per interval, so a hot key does not write on every request.
      entry.lastTouched = now;
      const touched = entry.record;
      this.#o.keys.touch(touched.id, now).catch(() => this.#o.logger.warn({ keyId: touched.id }, 'could not record key use'));
    }
    return entry.record;
  }

  async close(): Promise<void> {
    this.#cache.clear();
    if (this.#subscriber) await this.#subscriber.unsubscribe(this.#o.revocationChannel).catch(() => undefined);
  }
}
