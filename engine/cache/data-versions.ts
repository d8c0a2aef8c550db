// Per-user data versions in Redis, shared by every node: each write to a user's memories, action items, goals or memory
// gate changes the user's version, so a node may reuse answers computed from that data while the version stands.
import { randomBytes } from 'node:crypto';
import type { RedisClient } from '../redis.js';
import type { Logger } from '../logger.js';
import { EngineError } from '../errors.js';

/**
 * Rationale: a version is a hash `{v: token, w: writes in flight}`. A write first counts itself in (`w` + 1, awaited,
 * before the store is touched), then counts itself out and sets a fresh `v` once the store has committed. A reader
 * (the rate-limit script, in the same round trip) reuses a cached answer only when `w` is 0 and `v` is the token
 * the answer was computed under. So a reader never trusts a token while a write may have committed unannounced:
 * if the count-out is lost (Redis away, process killed), `w` stays up and nothing is reused until the hash expires,
 * after which a new token starts (tokens are never reused, even after Redis loses its data).
 */
const BEGIN = `
redis.call('HINCRBY', KEYS[1], 'w', 1)
redis.call('PEXPIRE', KEYS[1], ARGV[1])
`;

const END = `
if redis.call('HINCRBY', KEYS[1], 'w', -1) < 0 then redis.call('HSET', KEYS[1], 'w', 0) end
redis.call('HSET', KEYS[1], 'v', ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
`;

/**
 * Lua that reads the version at key `key` into locals `dv` (token) and `dw` (writes in flight), starting a version
 * with token `token` and lifetime `ttl` (Lua expressions) when there is none. The rate-limit script embeds it, so a
 * request learns its user's version in the round trip it makes anyway.
 */
export function readVersionLua(key: string, token: string, ttl: string): string {
  return `
  local dvw = redis.call('HMGET', ${key}, 'v', 'w')
  local dv = dvw[1]
  local dw = tonumber(dvw[2] or '0')
  if not dv then
    dv = ${token}
    redis.call('HSET', ${key}, 'v', dv)
    redis.call('PEXPIRE', ${key}, ${ttl})
  end`;
}

/** Lifetime of a version hash after its last write, in milliseconds; a lost count-out disables reuse at most this long. */
export const VERSION_TTL_MS = 3_600_000;

/** What repositories need: run a write of `uid`'s data so every node's cached answers about it stop being reused. */
export interface VersionedWrites {
  write<T>(uid: string, run: () => Promise<T>): Promise<T>;
}

/** For code where no node caches (store-only tests and tools): writes run as they are. */
export const UNVERSIONED: VersionedWrites = { write: (_uid, run) => run() };

export interface DataVersionsOptions {
  readonly redis: RedisClient;
  /** Key prefix (REDIS_PREFIX). */
  readonly prefix: string;
  readonly logger: Logger;
  /** Longest wait for Redis before a write is refused with 503 (or its end is given up), in milliseconds. @defaultValue 1000 */
  readonly timeoutMs?: number;
}

type Scripts = RedisClient & {
  dataVersionBegin(key: string, ttlMs: number): Promise<unknown>;
  dataVersionEnd(key: string, token: string, ttlMs: number): Promise<unknown>;
};

export class DataVersions implements VersionedWrites {
  readonly #o: DataVersionsOptions;
  readonly #redis: Scripts;
  /** Tokens are this process's random prefix and a counter: unique across nodes and restarts. */
  readonly #origin = randomBytes(6).toString('base64url');
  #counter = 0;

  constructor(opts: DataVersionsOptions) {
    this.#o = opts;
    const r = opts.redis as unknown as Partial<Scripts>;
    if (!r.dataVersionBegin) opts.redis.defineCommand('dataVersionBegin', { numberOfKeys: 1, lua: BEGIN });
    if (!r.dataVersionEnd) opts.redis.defineCommand('dataVersionEnd', { numberOfKeys: 1, lua: END });
    this.#redis = opts.redis as unknown as Scripts;
  }

  /** The Redis key of `uid`'s version; the user id is its hash tag, as in the rate-limit keys read with it. */
  key(uid: string): string {
    return `${this.#o.prefix}:dv:{${uid}}`;
  }

  /** A token no other version has had. */
  freshToken(): string {
    return `${this.#origin}.${(++this.#counter).toString(36)}`;
  }

  /**
   * Runs `run` (a write of `uid`'s data) between counting it in and out. Throws 503 without running it when Redis
   * does not confirm the count-in. A count-out that fails is logged, not thrown: the write has committed, and
   * readers keep going to the store until the version expires.
   */
  async write<T>(uid: string, run: () => Promise<T>): Promise<T> {
    const key = this.key(uid);
    try {
      await this.#within(this.#redis.dataVersionBegin(key, VERSION_TTL_MS));
    } catch (err) {
      // Fail closed: a write other nodes cannot hear of would leave their cached answers stale.
      throw new EngineError('ENG_ERR_DEPENDENCY_UNAVAILABLE', { dependency: 'the data version store' }, { cause: err });
    }
    try {
      return await run();
    } finally {
      await this.#within(this.#redis.dataVersionEnd(key, this.freshToken(), VERSION_TTL_MS)).catch(() =>
        this.#o.logger.warn('could not announce the end of a write; cached answers of its user are bypassed until the version expires'),
      );
    }
  }

  async #within(command: Promise<unknown>): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        command,
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new Error('data version timeout')), this.#o.timeoutMs ?? 1000);
        }),
      ]);
    } finally {
      clearTimeout(timer);
    }
  }
}
