// The push retry waits: doubling from PUSH_RETRY_BASE_MS with up to 10% more, never shorter than the server's Retry-After.
import t from 'tap';
import { PUSH_ATTEMPTS, PUSH_RETRY_BASE_MS, pushRetryDelayMs } from '../../../engine/notifications/push-jobs.js';

t.test('waits double from the base and take up to a tenth more', async (t) => {
  t.same([1, 2, 3, 4].map((n) => pushRetryDelayMs(n, undefined, () => 0)), [1, 2, 4, 8].map((k) => k * PUSH_RETRY_BASE_MS));
  t.equal(pushRetryDelayMs(3, undefined, () => 1), Math.round(4 * PUSH_RETRY_BASE_MS * 1.1), 'at most 10% longer');
  const total = Array.from({ length: PUSH_ATTEMPTS - 1 }, (_, i) => pushRetryDelayMs(i + 1, undefined, () => 0)).reduce((a, b) => a + b, 0);
  t.equal(total, 510_000, 'about 8.5 minutes of waits in all, as documented');
});

t.test("the server's Retry-After is a floor", async (t) => {
  t.equal(pushRetryDelayMs(1, 30, () => 0), 30_000, 'a longer Retry-After wins');
  t.equal(pushRetryDelayMs(4, 1, () => 0), 8 * PUSH_RETRY_BASE_MS, 'a shorter one does not shorten the backoff');
});
