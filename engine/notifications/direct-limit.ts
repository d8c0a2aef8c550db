// The direct-notification limit: at most DIRECT_PER_HOUR per app per user per clock hour (UTC), counted in Redis so
// every API node shares it.
import type { RedisClient } from '../redis.js';
import type { Clock } from '../clock.js';

/** Direct notifications one app may send one user per clock hour, as the compatible system allows. */
export const DIRECT_PER_HOUR = 10;
const HOUR_MS = 3_600_000;

/** Counts one more unless the window is full; answers whether it was taken and the count after. */
const TAKE = `
local n = tonumber(redis.call('GET', KEYS[1]) or '0')
if n >= tonumber(ARGV[1]) then return {0, n} end
n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return {1, n}
`;

export interface LimitState {
  allowed: boolean;
  /** X-RateLimit-Limit, -Remaining and -Reset (the Unix time, in seconds, the window ends). */
  headers: Record<string, string>;
  /** Seconds until the window ends. */
  retryAfterS: number;
}

type Counting = RedisClient & { directNotificationTake(key: string, limit: number, ttlMs: number): Promise<[number, number]> };

export class DirectLimit {
  readonly #redis: Counting;

  constructor(private readonly o: { redis: RedisClient; clock: Clock; prefix: string }) {
    // A defined command goes by its SHA after the first call, not as the script's text each time.
    if (!('directNotificationTake' in o.redis)) o.redis.defineCommand('directNotificationTake', { numberOfKeys: 1, lua: TAKE });
    this.#redis = o.redis as Counting;
  }

  #window(appId: string, uid: string): { key: string; endMs: number; now: number } {
    const now = this.o.clock.now();
    const hour = Math.floor(now / HOUR_MS);
    return { key: `${this.o.prefix}:notify:direct:${appId}:${uid}:${hour}`, endMs: (hour + 1) * HOUR_MS, now };
  }

  #state(allowed: boolean, count: number, endMs: number, now: number): LimitState {
    return {
      allowed,
      retryAfterS: Math.max(1, Math.ceil((endMs - now) / 1000)),
      headers: {
        'x-ratelimit-limit': String(DIRECT_PER_HOUR),
        'x-ratelimit-remaining': String(Math.max(0, DIRECT_PER_HOUR - count)),
        'x-ratelimit-reset': String(Math.floor(endMs / 1000)),
      },
    };
  }

  /** Takes one from the window, unless it is full. */
  async take(appId: string, uid: string): Promise<LimitState> {
    const { key, endMs, now } = this.#window(appId, uid);
    const [taken, count] = await this.#redis.directNotificationTake(key, DIRECT_PER_HOUR, endMs - now + 60_000);
    return this.#state(taken === 1, count, endMs, now);
  }

  /** The window as it stands, without counting (the headers of a refused request). */
  async peek(appId: string, uid: string): Promise<LimitState> {
    const { key, endMs, now } = this.#window(appId, uid);
    const count = Number((await this.o.redis.get(key)) ?? 0);
    return this.#state(count < DIRECT_PER_HOUR, count, endMs, now);
  }

  /** The headers of a request that names no user: nothing to count against. */
  fresh(): LimitState {
    const now = this.o.clock.now();
    return this.#state(true, 0, (Math.floor(now / HOUR_MS) + 1) * HOUR_MS, now);
  }
}
