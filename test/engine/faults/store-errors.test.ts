// Which store errors answer 503 (retry later) rather than 500: the store cannot serve now, or a bug.
import t from 'tap';
import { isStoreUnavailable } from '../../../engine/db/store-errors.js';

const err = (fields: Record<string, unknown>): Error => Object.assign(new Error('x'), fields);

t.test('a store that is full, busy, unreachable or lost its connection is unavailable', async (t) => {
  for (const code of ['SQLITE_FULL', 'SQLITE_IOERR_WRITE', 'SQLITE_BUSY', 'ECONNREFUSED', 'ECONNRESET', 'ENOSPC', '57P01', '08006', '53100']) t.ok(isStoreUnavailable(err({ code })), code);
  t.ok(isStoreUnavailable(err({ name: 'KnexTimeoutError' })), 'the pool gave up waiting');
  t.ok(isStoreUnavailable(new Error('Connection terminated unexpectedly')), 'node-postgres lost its connection');
  t.ok(isStoreUnavailable(new Error('select * from "memories" where "user_id" = $1 - Query read timeout')), 'a query unanswered past DATABASE_QUERY_TIMEOUT_MS, as knex reports it');
  t.ok(isStoreUnavailable(new Error('timeout expired')), 'a connection attempt that took too long');
  t.ok(isStoreUnavailable(new Error('wrapped', { cause: err({ code: 'SQLITE_FULL' }) })), 'through a cause');
});

t.test('a bug or a bad statement is not', async (t) => {
  for (const code of ['SQLITE_CONSTRAINT', 'SQLITE_ERROR', '23505', '42P01', 'ERR_INVALID_ARG_TYPE', undefined]) t.notOk(isStoreUnavailable(err({ code })), String(code));
  t.notOk(isStoreUnavailable(new TypeError('undefined is not a function')));
  t.notOk(isStoreUnavailable(new Error("select 'Query read timeout' - syntax error at or near")), 'those words inside a statement are not the timeout');
  t.notOk(isStoreUnavailable(undefined));
});
