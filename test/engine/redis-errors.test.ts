// Which errors mean Redis is away (answered 503, to be retried) rather than a bug (500): ioredis's own errors for a
// lost connection, spent retries and a command left unanswered, also as the cause of another error.
import t from 'tap';
import { isRedisUnavailable } from '../../engine/redis.js';

t.test('errors of a Redis that is away', async (t) => {
  t.ok(isRedisUnavailable(new Error('Command timed out')));
  t.ok(isRedisUnavailable(new Error('Connection is closed.')));
  t.ok(isRedisUnavailable(new Error("Stream isn't writeable and enableOfflineQueue options is false")));
  t.ok(isRedisUnavailable(Object.assign(new Error('Reached the max retries per request limit (which is 2).'), { name: 'MaxRetriesPerRequestError' })));
  t.ok(isRedisUnavailable(new Error('enqueue failed', { cause: new Error('Command timed out') })), 'as a cause');
});

t.test('other errors', async (t) => {
  t.notOk(isRedisUnavailable(new Error('ERR wrong number of arguments')), 'a command Redis refused is a bug');
  t.notOk(isRedisUnavailable(new TypeError("Cannot read properties of undefined (reading 'x')")));
  t.notOk(isRedisUnavailable(undefined));
  t.notOk(isRedisUnavailable('Command timed out'), 'a string is not an error');
});
