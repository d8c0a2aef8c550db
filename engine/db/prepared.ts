// Hot-path queries as statements prepared once per sqlite connection (PostgreSQL: knex.raw), beside knex's own queries.
import type { Knex } from 'knex';

/**
 * Rationale: on sqlite, knex prepares, runs and finalises every query as three separate hops through the libuv
 * thread pool; a statement prepared once per connection takes one hop, which on a busy node is most of the cost of
 * a short query (measured on the memory list: about a fifth of the process's CPU per request). Only the store's own
 * client (engine/db/store.ts) keeps statements, because it finalises them before it closes a connection.
 */
export const KEEPS_STATEMENTS = Symbol('keeps prepared statements');

interface Statement {
  all(params: readonly unknown[], cb: (err: Error | null, rows: unknown[]) => void): void;
  run(params: readonly unknown[], cb: (this: { changes: number }, err: Error | null) => void): void;
  finalize(cb: () => void): void;
}

interface Connection {
  prepare(sql: string): Statement;
}

interface PoolClient {
  acquireConnection(): Promise<object>;
  releaseConnection(conn: object): Promise<void>;
  emit(event: 'query', q: { sql: string; bindings: readonly Knex.Value[]; method: string }): void;
}

/** knex's PostgreSQL client. */
interface PgClient extends PoolClient {
  /** `?` placeholders as `$1`, `$2`, … (knex's own conversion). */
  positionBindings(sql: string): string;
}

/** A pooled node-postgres connection, as knex's PostgreSQL client hands it out. */
interface PgConnection {
  query(text: string, values: readonly unknown[]): Promise<{ rowCount: number | null }>;
}

const statements = new WeakMap<object, Map<string, Statement>>();

/** Finalises what `select` and `execute` kept on `conn`; the store calls it before closing the connection. */
export async function finalizeStatements(conn: object): Promise<void> {
  const kept = statements.get(conn);
  statements.delete(conn);
  if (kept) await Promise.all([...kept.values()].map((st) => new Promise<void>((resolve) => st.finalize(resolve))));
}

const keepsStatements = (knex: Knex): boolean => (knex.client as { [KEEPS_STATEMENTS]?: boolean })[KEEPS_STATEMENTS] === true;

/** The statement for `sql` kept on `conn` (prepared on first use). */
function statementOn(conn: object, sql: string): Statement {
  let kept = statements.get(conn);
  if (!kept) statements.set(conn, (kept = new Map()));
  let st = kept.get(sql);
  if (!st) kept.set(sql, (st = (conn as Connection).prepare(sql)));
  return st;
}

/** Drops a statement that failed, so the next use prepares it afresh. */
function forget(conn: object, sql: string, st: Statement): void {
  statements.get(conn)?.delete(sql);
  st.finalize(() => undefined);
}

function run(st: Statement, bindings: readonly Knex.Value[]): Promise<number> {
  return new Promise<number>((resolve, reject) =>
    st.run(bindings, function (err) {
      if (err) reject(err);
      else resolve(this.changes);
    }),
  );
}

/** Runs `sql` on `conn` with its kept statement; resolves to the rows changed. */
async function runOn(client: PoolClient, conn: object, sql: string, bindings: readonly Knex.Value[]): Promise<number> {
  // Listeners of knex's `query` event (logs, tests) hear of these queries too.
  client.emit('query', { sql, bindings, method: 'run' });
  const st = statementOn(conn, sql);
  try {
    return await run(st, bindings);
  } catch (err) {
    forget(conn, sql, st);
    throw err;
  }
}

/** Runs `sql` on a PostgreSQL connection; resolves to the rows changed. */
async function runPg(client: PgClient, conn: PgConnection, sql: string, bindings: readonly Knex.Value[]): Promise<number> {
  client.emit('query', { sql, bindings, method: 'run' });
  return (await conn.query(client.positionBindings(sql), bindings)).rowCount ?? 0;
}

/** Runs `use` with the connection's statement for `sql`, outside any transaction; a statement that failed is not kept. */
async function withStatement<T>(knex: Knex, sql: string, bindings: readonly Knex.Value[], method: string, use: (st: Statement) => Promise<T>): Promise<T> {
  const client = knex.client as unknown as PoolClient;
  const conn = await client.acquireConnection();
  try {
    client.emit('query', { sql, bindings, method });
    const st = statementOn(conn, sql);
    try {
      return await use(st);
    } catch (err) {
      forget(conn, sql, st);
      throw err;
    }
  } finally {
    await client.releaseConnection(conn);
  }
}

/** Runs one write statement inside writeTransaction(); resolves to the rows it changed. */
export type TransactionRun = (sql: string, bindings: readonly Knex.Value[]) => Promise<number>;

/**
 * Runs `work` in one write transaction on one pooled connection, without knex's per-transaction objects (a knex
 * transaction builds a whole knex instance; on sqlite, at every usage write, they were a fifth of what the main
 * thread promoted to its old generation): sqlite BEGIN IMMEDIATE, as the store's knex transactions do, with
 * statements kept per connection like `execute`'s; PostgreSQL BEGIN on a pooled node-postgres client, `?`
 * placeholders positioned as knex does. Rolled back if `work` throws; resolves to its result.
 */
export async function writeTransaction<T>(knex: Knex, work: (run: TransactionRun) => Promise<T>): Promise<T> {
  const client = knex.client as unknown as PoolClient;
  const sqlite = keepsStatements(knex);
  const conn = await client.acquireConnection();
  const exec: TransactionRun = sqlite ? (sql, bindings) => runOn(client, conn, sql, bindings) : (sql, bindings) => runPg(client as PgClient, conn as PgConnection, sql, bindings);
  try {
    await exec(sqlite ? 'BEGIN IMMEDIATE' : 'BEGIN', []);
    try {
      const result = await work(exec);
      await exec('COMMIT', []);
      return result;
    } catch (err) {
      await exec('ROLLBACK', []).catch(() => undefined);
      throw err;
    }
  } finally {
    await client.releaseConnection(conn);
  }
}

/** `n` copies of `each` joined by `separator` (placeholder lists, repeated SQL terms). */
export const repeat = (n: number, each: string, separator = ', '): string => Array.from({ length: n }, () => each).join(separator);

/**
 * The INSERT of `n` rows of `columns` into `table`, a `?` per value; one SQL text per (table, n), so a caller that
 * varies `n` bounds how many texts a connection keeps. Columns are quoted (some, like "end", are keywords).
 */
export const insertRowsSql = (table: string, columns: readonly string[], n: number): string =>
  `INSERT INTO ${table} (${columns.map((c) => `"${c}"`).join(', ')}) VALUES ${repeat(n, `(${repeat(columns.length, '?')})`)}`;

/** A read; `sql` uses `?` placeholders and comes from a small fixed set (each one is kept per connection). */
export async function select<T>(knex: Knex, sql: string, bindings: readonly Knex.Value[]): Promise<T[]> {
  if (!keepsStatements(knex)) return ((await knex.raw(sql, bindings)) as { rows: T[] }).rows;
  return withStatement(knex, sql, bindings, 'select', (st) => new Promise<T[]>((resolve, reject) => st.all(bindings, (err, rows) => (err ? reject(err) : resolve(rows as T[])))));
}

/** A write of one statement (all or nothing by itself); resolves to the rows it changed. Same rules as `select`. */
export async function execute(knex: Knex, sql: string, bindings: readonly Knex.Value[]): Promise<number> {
  if (!keepsStatements(knex)) return ((await knex.raw(sql, bindings)) as { rowCount: number }).rowCount;
  return withStatement(knex, sql, bindings, 'run', (st) => run(st, bindings));
}
