// Hot-path queries as statements prepared once per sqlite connection (PostgreSQL: knex.raw), beside knex's own queries.
import type { Knex } from 'knex';

/**
 * Rationale: on sqlite, knex prepares, runs and finalises every query as three separate hops through the libuv
 * thread pool; a statement prepared once per connection takes one hop, and on a busy node those hops are most of
 * the cost of a short query. Only the store's own client (engine/db/store.ts) keeps statements, because it finalises
 * them before it closes a connection.
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

/** Whether `knex` is the store's sqlite client (which SQL insertStatements() writes for it). */
export const keepsStatements = (knex: Knex): boolean => (knex.client as { [KEEPS_STATEMENTS]?: boolean })[KEEPS_STATEMENTS] === true;

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
export interface TransactionRun {
  (sql: string, bindings: readonly Knex.Value[]): Promise<number>;
  /** Whether the store is sqlite (which SQL insertStatements() writes). */
  readonly sqlite: boolean;
}

/**
 * Runs `work` in one write transaction on one pooled connection, without knex's per-transaction objects (a knex
 * transaction builds a whole knex instance, which outlives the write's thread-pool hops into the old generation):
 * sqlite BEGIN IMMEDIATE, as the store's knex transactions do, with
 * statements kept per connection like `execute`'s; PostgreSQL BEGIN on a pooled node-postgres client, `?`
 * placeholders positioned as knex does. Rolled back if `work` throws; resolves to its result.
 */
export async function writeTransaction<T>(knex: Knex, work: (run: TransactionRun) => Promise<T>): Promise<T> {
  const client = knex.client as unknown as PoolClient;
  const sqlite = keepsStatements(knex);
  const conn = await client.acquireConnection();
  const exec: TransactionRun = Object.assign(
    sqlite ? (sql: string, bindings: readonly Knex.Value[]) => runOn(client, conn, sql, bindings) : (sql: string, bindings: readonly Knex.Value[]) => runPg(client as PgClient, conn as PgConnection, sql, bindings),
    { sqlite },
  );
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
 * The INSERT of `n` rows of `columns` into `table`, a `?` per value. Columns are quoted (some, like "end", are
 * keywords). Kept statements of varying `n` go through insertStatements() instead.
 */
export const insertRowsSql = (table: string, columns: readonly string[], n: number): string =>
  `INSERT INTO ${table} (${quoted(columns)}) VALUES ${repeat(n, `(${repeat(columns.length, '?')})`)}`;

const quoted = (columns: readonly string[]): string => columns.map((c) => `"${c}"`).join(', ');

/** One value of a row for insertStatements(): what a JSON array carries and gives back unchanged. */
export type RowValue = string | number | boolean | null;

/** PostgreSQL's limit of bound values per statement. */
const PG_MAX_BINDINGS = 65_535;

/** sqlite's INSERT texts by table, columns and suffix (built once). */
const jsonInserts = new Map<string, string>();

/** Text sqlite's JSON functions do not give back as bound text would be: U+0000 (cut there) and lone surrogates. */
const NOT_JSON_SAFE = /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;
/** Whether every value survives JSON unchanged (JSON has no NaN or infinities: they would become null). */
const jsonSafe = (rows: readonly (readonly RowValue[])[]): boolean =>
  rows.every((r) => r.every((v) => (typeof v === 'string' ? !NOT_JSON_SAFE.test(v) : typeof v !== 'number' || Number.isFinite(v))));

/**
 * The statements, with their bindings, that insert `rows` (each the values of `columns`, in order) into `table`,
 * `suffix` (an ON CONFLICT clause) after each. sqlite: one statement whatever the number of rows, the same text each
 * time: the rows travel as one JSON array in one `?` and json_each() spreads them out. PostgreSQL: multi-row VALUES,
 * as many rows to a statement as its bound values allow.
 *
 * Rationale: a VALUES list has one text per row count, and every text is prepared and kept on each sqlite connection
 * for its life, so sqlite's memory would grow with each new row count; the one json_each text runs as fast. Rows
 * holding what JSON would not give back unchanged (text with U+0000 or a lone surrogate, NaN, infinities) go one
 * statement each, as the one-row VALUES text.
 */
export function insertStatements(sqlite: boolean, table: string, columns: readonly string[], rows: readonly (readonly RowValue[])[], suffix = ''): [sql: string, bindings: RowValue[]][] {
  if (rows.length === 0) return [];
  const tail = suffix ? ` ${suffix}` : '';
  if (sqlite && !jsonSafe(rows)) {
    // What JSON would change goes row by row, as bound values (the one-row text).
    const sql = insertRowsSql(table, columns, 1) + tail;
    return rows.map((r) => [sql, [...r]]);
  }
  if (sqlite) {
    const key = `${table}\u0000${columns.join(',')}\u0000${suffix}`;
    let sql = jsonInserts.get(key);
    if (sql === undefined) {
      // WHERE true: without it sqlite would read ON CONFLICT as a join's ON.
      const values = columns.map((_, i) => `json_extract(value, '$[${i}]')`).join(', ');
      jsonInserts.set(key, (sql = `INSERT INTO ${table} (${quoted(columns)}) SELECT ${values} FROM json_each(?) WHERE true${tail}`));
    }
    return [[sql, [JSON.stringify(rows)]]];
  }
  const perStatement = Math.floor(PG_MAX_BINDINGS / columns.length);
  const out: [string, RowValue[]][] = [];
  for (let at = 0; at < rows.length; at += perStatement) {
    const some = rows.slice(at, at + perStatement);
    out.push([insertRowsSql(table, columns, some.length) + tail, some.flat()]);
  }
  return out;
}

/** Runs insertStatements() for `rows` inside writeTransaction(). */
export async function runInserts(run: TransactionRun, table: string, columns: readonly string[], rows: readonly (readonly RowValue[])[], suffix = ''): Promise<void> {
  for (const [sql, bindings] of insertStatements(run.sqlite, table, columns, rows, suffix)) await run(sql, bindings);
}

/**
 * `column IN (…)` for a list of text values as ONE bound value (a JSON array), so a read of any number of ids is one
 * statement text, kept once per connection like the others (a `?` per id would make one text per list length).
 */
export function inJsonList(knex: Knex, column: string): string {
  return keepsStatements(knex) ? `${column} IN (SELECT value FROM json_each(?))` : `${column} IN (SELECT jsonb_array_elements_text(?::jsonb))`;
}

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
