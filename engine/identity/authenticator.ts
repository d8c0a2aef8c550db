// The one place bearer credentials are checked: ID tokens for the signed-in user, API keys (with scopes) for developers.
import { createHash } from 'node:crypto';
import type { RedisClient } from '../redis.js';
import type { Logger } from '../logger.js';
import type { Clock } from '../clock.js';
import { EngineError } from '../errors.js';
import type { ApiKeyRecord, ApiKeysRepository } from '../db/api-keys.js';
import type { KeyKind, Scope } from '../protocol.js';
import type { IdTokenVerifier, VerifiedIdToken } from './id-tokens.js';
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
const MAX_REMEMBERED_TOKENS = 50_000;

/**
 * ID tokens verified in the last few minutes, by SHA-256 of the token. A device that reconnects with the token it
 * used before is then admitted without waiting, and without another signature check. An entry ends at the token's
 * `exp` or after the cache's lifetime, whichever is first: a signing key withdrawn from the JWKS stops working here
 * at most that lifetime later.
 */
class VerifiedTokens {
  /** By the token's SHA-256; insertion order is age order; each entry ends by `until`. */
  readonly #entries = new Map<string, { uid: string; until: number }>();

  constructor(
    readonly ttlMs: number,
    readonly max: number,
  ) {}

  /** The uid of `token` if it was verified within the lifetime and has not expired (no hashing when off). */
  get(token: string, now: number): string | undefined {
    if (this.ttlMs <= 0 || this.#entries.size === 0) return undefined;
    const key = digest(token);
    const entry = this.#entries.get(key);
    if (!entry) return undefined;
    if (entry.until > now) return entry.uid;
    this.#entries.delete(key);
    return undefined;
  }

  put(token: string, verified: VerifiedIdToken, now: number): void {
    if (this.ttlMs <= 0) return;
    // Entries older than the lifetime have all ended: drop them from the old end, so the map holds at most the
    // tokens of the last ttlMs (and never more than max).
    for (const [oldest, entry] of this.#entries) {
      if (entry.until > now && this.#entries.size < this.max) break;
      this.#entries.delete(oldest);
    }
    const key = digest(token);
    this.#entries.delete(key);
    this.#entries.set(key, { uid: verified.uid, until: Math.min(verified.expiresAtMs, now + this.ttlMs) });
  }

  get size(): number {
    return this.#entries.size;
  }

  /** Forgets every token of `uid`'s. */
  forgetUser(uid: string): void {
    for (const [key, entry] of this.#entries) if (entry.uid === uid) this.#entries.delete(key);
  }

  clear(): void {
    this.#entries.clear();
  }
}

function digest(token: string): string {
  return createHash('sha256').update(token).digest('base64');
}

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
  /** How long a verified ID token is remembered, in milliseconds (never past its `exp`); 0 verifies every time. */
  readonly idTokenCacheMs: number;
  /** Redis channel on which revocations are announced to every node. */
  readonly revocationChannel: string;
  /** When accounts were deleted: their ID tokens issued before it are refused. */
  readonly deletedAccounts?: { deletedAt(uid: string): Promise<number | undefined> };
}

/** A revocation message naming a user (every token of theirs) rather than a key hash (hex). */
const USER_REVOKED = 'user:';

export class Authenticator {
  readonly #o: AuthenticatorOptions;
  readonly #cache = new Map<string, CacheEntry>();
  readonly #tokens: VerifiedTokens;
  /** Users forgotten so far: a verification that saw it change reads the deletion record again. */
  #forgets = 0;
  #publisher: RedisClient | undefined;
  #subscriber: RedisClient | undefined;

  constructor(opts: AuthenticatorOptions) {
    this.#o = opts;
    this.#tokens = new VerifiedTokens(opts.idTokenCacheMs, MAX_REMEMBERED_TOKENS);
  }

  /** Listens for revocations made on other nodes so their cached keys die at once here too. */
  async attach(publisher: RedisClient, subscriber: RedisClient): Promise<void> {
    this.#publisher = publisher;
    this.#subscriber = subscriber;
    subscriber.on('message', (channel: string, message: string) => {
      if (channel !== this.#o.revocationChannel) return;
      if (message.startsWith(USER_REVOKED)) this.#forgetUser(message.slice(USER_REVOKED.length));
      else this.#cache.delete(message);
    });
    await subscriber.subscribe(this.#o.revocationChannel);
  }

  /**
   * Verifies an ID token from the Authorization header; 401 "Not authenticated" when there is none, and when it was
   * issued before its account was deleted, unless `ofDeletedAccount` (finishing that deletion).
   */
  async idToken(header: string | undefined, ofDeletedAccount = false): Promise<Principal> {
    const token = bearer(header);
    if (!token) throw new EngineError('ENG_ERR_AUTH_NOT_AUTHENTICATED', {}, { headers: { 'www-authenticate': 'Bearer' } });
    return { uid: await this.#verify(token, ofDeletedAccount), via: 'id_token' };
  }

  /**
   * The principal of an ID token verified recently and not yet expired, at once; undefined when it has to go through
   * idToken(). Lets the listen upgrade admit a reconnecting device inside uWS's own upgrade callback.
   */
  knownIdToken(header: string | undefined): Principal | undefined {
    const token = bearer(header);
    const uid = token === undefined ? undefined : this.#tokens.get(token, this.#o.clock.now());
    return uid === undefined ? undefined : { uid, via: 'id_token' };
  }

  /** Number of ID tokens remembered as verified (for tests). */
  get knownIdTokens(): number {
    return this.#tokens.size;
  }

  async #verify(token: string, ofDeletedAccount = false): Promise<string> {
    const known = this.#tokens.get(token, this.#o.clock.now());
    if (known !== undefined) return known;
    const verified = await this.#o.verifier.verify(token);
    let deletedAt: number | undefined;
    // An account deleted while its record was read (forgotten meanwhile) is read again: the record is written
    // before the nodes are told, so the second read sees it.
    for (let forgets = -1; forgets !== this.#forgets; ) {
      forgets = this.#forgets;
      deletedAt = await this.#o.deletedAccounts?.deletedAt(verified.uid);
    }
    if (deletedAt !== undefined && verified.issuedAtMs <= deletedAt) {
      if (ofDeletedAccount) return verified.uid;
      throw new EngineError('ENG_ERR_AUTH_ACCOUNT_DELETED', {}, { headers: { 'www-authenticate': 'Bearer error="invalid_token"' } });
    }
    this.#tokens.put(token, verified, this.#o.clock.now());
    return verified.uid;
  }

  /** Forgets every remembered ID token of `uid`'s here and on every other node: their account was deleted. */
  async accountDeleted(uid: string): Promise<void> {
    this.#forgetUser(uid);
    if (this.#publisher) await this.#publisher.publish(this.#o.revocationChannel, `${USER_REVOKED}${uid}`);
  }

  #forgetUser(uid: string): void {
    this.#forgets++;
    this.#tokens.forgetUser(uid);
  }

  /**
   * Checks a key of family `kind` carrying `scope`. With `alsoIdToken`, a credential that is not an API key
   * is tried as an ID token (a signed-in user holds every scope over their own data).
   */
  async apiKey(header: string | undefined, kind: KeyKind, scope: Scope | undefined, alsoIdToken = false): Promise<Principal> {
    const credential = bearer(header);
    if (!credential) throw new EngineError('ENG_ERR_AUTH_HEADER_MISSING');
    if (alsoIdToken && !credential.startsWith('svc_')) return { uid: await this.#verify(credential), via: 'id_token' };
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
    this.#tokens.clear();
    if (this.#subscriber) await this.#subscriber.unsubscribe(this.#o.revocationChannel).catch(() => undefined);
  }
}
