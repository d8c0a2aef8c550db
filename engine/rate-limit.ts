// Developer REST rate limits in Redis, shared by every API node: fixed windows per key per minute and per user per UTC day.
import type { Redis } from 'ioredis';
import type { Clock } from './clock.js';
import { EngineError } from './errors.js';

/** Both windows counted in one round trip: INCR each, set its expiry on first use, return both counts. */
const SCRIPT = `
local m = redis.call('INCR', KEYS[1])
if m == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
local d = redis.call('INCR', KEYS[2])
if d == 1 then redis.call('PEXPIRE', KEYS[2], ARGV[2]) end
return {m, d}
`;

const MINUTE_MS = 60_000;
const DAY_MS = 86_400_000;

export interface RateLimitOptions {
  readonly redis: Redis;
  readonly clock: Clock;
  /** Key prefix (REDIS_PREFIX). */
  readonly prefix: string;
  readonly perMinute: number;
  readonly perDay: number;
  /** Longest wait for Redis before failing closed with 503, in milliseconds. */
  readonly timeoutMs?: number;
}

type Counter = Redis & { rateLimitHit(minuteKey: string, dayKey: string, minuteTtlMs: number, dayTtlMs: number): Promise<[number, number]> };

export class RateLimiter {
  readonly #o: RateLimitOptions;
  readonly #redis: Counter;

  constructor(opts: RateLimitOptions) {
    this.#o = opts;
    if (!(opts.redis as unknown as Partial<Counter>).rateLimitHit) opts.redis.defineCommand('rateLimitHit', { numberOfKeys: 2, lua: SCRIPT });
    this.#redis = opts.redis as unknown as Counter;
  }

  /**
   * Counts one request of `subject` (the key id, or the user for ID-token calls) by user `uid`.
   * Resolves to the X-RateLimit-* headers of the tighter window; throws 429 over a limit, 503 when Redis does not answer.
   */
  async hit(subject: string, uid: string): Promise<Record<string, string>> {
    const now = this.#o.clock.now();
    const minute = Math.floor(now / MINUTE_MS);
    const day = Math.floor(now / DAY_MS);
    const minuteResetMs = (minute + 1) * MINUTE_MS;
    const dayResetMs = (day + 1) * DAY_MS;
    const p = this.#o.prefix;
    let counts: [number, number];
    let timer: NodeJS.Timeout | undefined;
    try {
      counts = await Promise.race([
        // Keys expire a little after their window so a skewed node never sees a reset counter early.
        this.#redis.rateLimitHit(`${p}:rl:min:${subject}:${minute}`, `${p}:rl:day:${uid}:${day}`, MINUTE_MS * 2, DAY_MS + MINUTE_MS),
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new Error('rate limiter timeout')), this.#o.timeoutMs ?? 1000);
        }),
      ]);
    } catch (err) {
      // Fail closed: without Redis no node can tell how many requests a key made.
      throw new EngineError('ENG_ERR_DEPENDENCY_UNAVAILABLE', { dependency: 'the rate limiter' }, { cause: err });
    } finally {
      clearTimeout(timer);
    }
    const [m, d] = counts.map(Number) as [number, number];
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
    return headers;
  }
}
