// Developer REST rate limits in Redis, shared by every API node: fixed windows per key per minute and per user per UTC day.
import type { RedisClient } from '../redis.js';
import type { Clock } from '../clock.js';
import { EngineError } from '../errors.js';
import { VERSION_TTL_MS, readVersionLua, type DataVersions } from '../cache/data-versions.js';

/**
 * Both windows counted in one round trip: INCR each, set its expiry on first use, return both counts. The same round
 * trip reads the user's data version (engine/cache/data-versions.ts), so a request learns whether cached answers still hold
 * without asking Redis twice. Rationale: one call counts every request of an event-loop turn (three keys each, a
 * fresh version token each in ARGV[3 + i]), because ioredis builds, writes and parses each command on its own.
 */
const SCRIPT = `
local out = {}
for i = 1, #KEYS / 3 do
  local k = i * 3 - 2
  local m = redis.call('INCR', KEYS[k])
  if m == 1 then redis.call('PEXPIRE', KEYS[k], ARGV[1]) end
  local d = redis.call('INCR', KEYS[k + 1])
  if d == 1 then redis.call('PEXPIRE', KEYS[k + 1], ARGV[2]) end
  ${readVersionLua('KEYS[k + 2]', 'ARGV[3 + i]', 'ARGV[3]')}
  out[#out + 1] = m
  out[#out + 1] = d
  out[#out + 1] = dv
  out[#out + 1] = dw
end
return out
`;

/**
 * Most requests one script call counts; a longer queue takes several calls. On a Redis Cluster a call counts the
 * requests of one user only: a script's keys must share a hash slot, and each user's keys carry the user id as their
 * hash tag (`svc:rl:min:{uid}:...`, `svc:rl:day:{uid}:...`, `svc:dv:{uid}`).
 */
const MAX_BATCH = 256;

const MINUTE_MS = 60_000;
const DAY_MS = 86_400_000;

export interface RateLimitOptions {
  readonly redis: RedisClient;
  readonly clock: Clock;
  /** Key prefix (REDIS_PREFIX). */
  readonly prefix: string;
  readonly perMinute: number;
  readonly perDay: number;
  /** Longest wait for Redis before failing closed with 503, in milliseconds. */
  readonly timeoutMs?: number;
  /** Whose version keys and tokens the script reads. */
  readonly versions: DataVersions;
}

export interface RateLimitResult {
  /** X-RateLimit-* headers of the tighter window. */
  readonly headers: Record<string, string>;
  /** The user's data version token; undefined while a write of the user's data is in flight (nothing cached may be reused). */
  readonly dataVersion: string | undefined;
}

type Counter = RedisClient & { rateLimitHits(numberOfKeys: number, ...keysThenArgs: (string | number)[]): Promise<(number | string)[]> };

/** One request waiting for the next script call: its keys, and what it gets back (counts, version token, writes in flight). */
interface Pending {
  uid: string;
  keys: [minute: string, day: string, version: string];
  resolve(counts: [number, number, string, number]): void;
  reject(err: unknown): void;
}

export class RateLimiter {
  readonly #o: RateLimitOptions;
  readonly #redis: Counter;
  #queue: Pending[] = [];

  constructor(opts: RateLimitOptions) {
    this.#o = opts;
    if (!(opts.redis as unknown as Partial<Counter>).rateLimitHits) opts.redis.defineCommand('rateLimitHits', { lua: SCRIPT });
    this.#redis = opts.redis as unknown as Counter;
  }

  /**
   * Counts one request of `subject` (the key id, or the user for ID-token calls) by user `uid`.
   * Resolves to the X-RateLimit-* headers of the tighter window and `uid`'s data version; throws 429 over a limit,
   * 503 when Redis does not answer.
   */
  async hit(subject: string, uid: string): Promise<RateLimitResult> {
    const now = this.#o.clock.now();
    const minute = Math.floor(now / MINUTE_MS);
    const day = Math.floor(now / DAY_MS);
    const minuteResetMs = (minute + 1) * MINUTE_MS;
    const dayResetMs = (day + 1) * DAY_MS;
    const p = this.#o.prefix;
    let counts: [number, number, string, number];
    try {
      counts = await new Promise((resolve, reject) => {
        this.#queue.push({ uid, keys: [`${p}:rl:min:{${uid}}:${subject}:${minute}`, `${p}:rl:day:{${uid}}:${day}`, this.#o.versions.key(uid)], resolve, reject });
        if (this.#queue.length === 1) setImmediate(() => this.#flush());
      });
    } catch (err) {
      // Fail closed: without Redis no node can tell how many requests a key made.
      throw new EngineError('ENG_ERR_DEPENDENCY_UNAVAILABLE', { dependency: 'the rate limiter' }, { cause: err });
    }
    const [m, d] = counts;
    const minuteLeft = this.#o.perMinute - m;
    const dayLeft = this.#o.perDay - d;
    const overMinute = minuteLeft < 0;
    const overDay = dayLeft < 0;
    // Report the window that runs out first; over a limit, the one that was exceeded (the day wins when both are).
    const useDay = overDay || (!overMinute && dayLeft < minuteLeft);
    const headers = {
      'x-ratelimit-limit': String(useDay ? this.#o.perDay : this.#o.perMinute),
      'x-ratelimit-remaining': String(Math.max(0, useDay ? dayLeft : minuteLeft)),
      'x-ratelimit-reset': String(Math.ceil((useDay ? dayResetMs : minuteResetMs) / 1000)),
    };
    if (overMinute || overDay) {
      const seconds = Math.max(1, Math.ceil(((useDay ? dayResetMs : minuteResetMs) - now) / 1000));
      throw new EngineError('ENG_ERR_RATE_LIMITED', { seconds }, { headers: { ...headers, 'retry-after': String(seconds) } });
    }
    return { headers, dataVersion: counts[3] === 0 ? counts[2] : undefined };
  }

  /** Counts every queued request in script calls of at most MAX_BATCH; each call fails its requests after the timeout. */
  #flush(): void {
    const queue = this.#queue;
    this.#queue = [];
    if (!this.#redis.isCluster) return this.#count(queue);
    const byUser = new Map<string, Pending[]>();
    for (const b of queue) {
      const group = byUser.get(b.uid);
      if (group) group.push(b);
      else byUser.set(b.uid, [b]);
    }
    for (const group of byUser.values()) this.#count(group);
  }

  /** Counts `queue` (requests whose keys share a hash slot) in script calls of at most MAX_BATCH. */
  #count(queue: Pending[]): void {
    for (let from = 0; from < queue.length; from += MAX_BATCH) {
      const batch = queue.slice(from, from + MAX_BATCH);
      const keys: string[] = [];
      const tokens: string[] = [];
      for (const b of batch) {
        keys.push(...b.keys);
        tokens.push(this.#o.versions.freshToken());
      }
      let timer: NodeJS.Timeout | undefined;
      Promise.race([
        // Keys expire a little after their window so a skewed node never sees a reset counter early.
        this.#redis.rateLimitHits(keys.length, ...keys, MINUTE_MS * 2, DAY_MS + MINUTE_MS, VERSION_TTL_MS, ...tokens),
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new Error('rate limiter timeout')), this.#o.timeoutMs ?? 1000);
        }),
      ]).then(
        (out) => {
          clearTimeout(timer);
          batch.forEach((b, i) => b.resolve([Number(out[i * 4]), Number(out[i * 4 + 1]), String(out[i * 4 + 2]), Number(out[i * 4 + 3])]));
        },
        (err: unknown) => {
          clearTimeout(timer);
          for (const b of batch) b.reject(err);
        },
      );
    }
  }
}
