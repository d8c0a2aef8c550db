// Store failures a client should retry rather than report: the store is unreachable, out of space or busy. The HTTP
// layer answers them 503 ENG_ERR_DEPENDENCY_UNAVAILABLE instead of 500 ENG_ERR_INTERNAL.
import { anyCause } from '../errors.js';

/** sqlite result codes of a store that cannot take the write now (disk full, I/O error, locked past the timeout). */
const SQLITE_UNAVAILABLE = /^SQLITE_(FULL|IOERR|BUSY|LOCKED|CANTOPEN|READONLY)/;
/** Node socket errors of a PostgreSQL server that went away or cannot be reached. */
const NET_UNAVAILABLE = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOSPC', 'EDQUOT']);
/** PostgreSQL SQLSTATE classes and codes of the same: connection exceptions (08), operator intervention (57P0x), insufficient resources (53). */
const PG_UNAVAILABLE = /^(08|53|57P0)/;

/** Whether `err` (or its cause) says the store cannot serve now, as opposed to a bug or a bad request. */
export function isStoreUnavailable(err: unknown): boolean {
  return anyCause(err, (e) => {
    const code = typeof e.code === 'string' ? e.code : '';
    if (SQLITE_UNAVAILABLE.test(code) || NET_UNAVAILABLE.has(code) || PG_UNAVAILABLE.test(code)) return true;
    // knex's pool gave up waiting for a connection; node-postgres lost the one it had.
    if (e.name === 'KnexTimeoutError') return true;
    // node-postgres: a connection that ended or never came; a query left unanswered past its timeout (knex puts the
    // query's SQL before that message).
    return typeof e.message === 'string' && /^(Connection terminated|timeout expired)|(^| - )Query read timeout$/.test(e.message);
  });
}
