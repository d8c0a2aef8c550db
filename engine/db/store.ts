// The store: one knex instance over an embedded sqlite file or PostgreSQL, with the append-only migrations in migrations/.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { createRequire } from 'node:module';
import knexFactory, { type Knex } from 'knex';
import type { Config } from '../config.js';
import { KEEPS_STATEMENTS, finalizeStatements } from './prepared.js';

export type Dialect = 'sqlite' | 'pg';

export interface Store {
  readonly knex: Knex;
  readonly dialect: Dialect;
  /** Round-trips one trivial query; throws when the store is unreachable. */
  ping(): Promise<void>;
  /** Applies pending migrations; returns the names applied. */
  migrate(): Promise<string[]>;
  /** Reverts every migration (tests and `npm run migrate -- down`). */
  rollbackAll(): Promise<string[]>;
  close(): Promise<void>;
}

const require = createRequire(import.meta.url);
type ClientClass = new (...args: unknown[]) => { transaction(...args: unknown[]): unknown };
const SqliteClient = require('knex/lib/dialects/sqlite3/index.js') as ClientClass;
const SqliteTransaction = require('knex/lib/dialects/sqlite3/execution/sqlite-transaction.js') as new (...args: unknown[]) => {
  query(conn: unknown, sql: string): Promise<unknown>;
};

/**
 * Rationale: several sqlite connections let reads run in parallel (WAL readers never block), but a deferred
 * transaction that reads and then writes can fail with SQLITE_BUSY when another connection wrote in between,
 * and the busy timeout does not help there. BEGIN IMMEDIATE takes the write lock up front, where the busy
 * timeout does apply, so write transactions queue instead of failing, and their reads see the latest data.
 */
class ImmediateSqliteTransaction extends SqliteTransaction {
  begin(conn: unknown): Promise<unknown> {
    return this.query(conn, 'BEGIN IMMEDIATE;');
  }
}

class ImmediateSqliteClient extends SqliteClient {
  /** Hot-path statements (engine/db/prepared.ts) are kept per connection of this client. */
  readonly [KEEPS_STATEMENTS] = true;

  override transaction(...args: unknown[]): unknown {
    return new ImmediateSqliteTransaction(this, ...args);
  }

  /** sqlite refuses to close a connection with live statements. */
  async destroyRawConnection(conn: object): Promise<void> {
    await finalizeStatements(conn);
    await (SqliteClient.prototype as unknown as { destroyRawConnection(c: object): Promise<void> }).destroyRawConnection.call(this, conn);
  }
}

/** sqlite connections: enough for parallel reads on the libuv threadpool (4 threads by default). */
const SQLITE_CONNECTIONS = 4;

/** Compiled migrations live beside the compiled engine: dist/migrations. */
const MIGRATIONS_DIR = fileURLToPath(new URL('../../migrations/', import.meta.url));

interface MigrationFile {
  name: string;
  file: string;
}

/** Lists migrations by name without extension, so the recorded name does not depend on .ts or .js. */
const migrationSource: Knex.MigrationSource<MigrationFile> = {
  async getMigrations() {
    const files = fs.readdirSync(MIGRATIONS_DIR).filter((f) => /^\d{14}_[a-z0-9_]+\.js$/.test(f));
    return files.sort().map((f) => ({ name: f.replace(/\.js$/, ''), file: path.join(MIGRATIONS_DIR, f) }));
  },
  getMigrationName: (m) => m.name,
  async getMigration(m) {
    return (await import(pathToFileURL(m.file).href)) as Knex.Migration;
  },
};

export interface StoreOptions {
  readonly dataDir: string;
  readonly databaseUrl: string | undefined;
  readonly databaseSchema: string;
  /** sqlite only: PRAGMA busy_timeout. @defaultValue 5000 */
  readonly sqliteBusyTimeoutMs?: number;
  /** PostgreSQL only: client-side limit on one query's wait for its answer; 0 waits. @defaultValue 30000 */
  readonly queryTimeoutMs?: number;
}

/** How the service's PostgreSQL connections show in pg_stat_activity. */
export const PG_APPLICATION_NAME = 'wearable-backend';
/** A connection attempt that takes longer fails (503 to the request that needed it). */
const PG_CONNECT_TIMEOUT_MS = 10_000;

export function storeOptions(config: Config): StoreOptions {
  return { dataDir: config.dataDir, databaseUrl: config.databaseUrl, databaseSchema: config.databaseSchema, sqliteBusyTimeoutMs: config.sqliteBusyTimeoutMs, queryTimeoutMs: config.databaseQueryTimeoutMs };
}

export function openStore(opts: StoreOptions): Store {
  let knex: Knex;
  let dialect: Dialect;
  /** PostgreSQL: a knex without the query timeout, for migrations (an index built on a large table takes its time). */
  let unlimited: (() => Knex) | undefined;
  if (opts.databaseUrl) {
    dialect = 'pg';
    const pg = (queryTimeoutMs: number): Knex.Config => ({
      client: 'pg',
      connection: {
        connectionString: opts.databaseUrl,
        // The URL's (or PGAPPNAME's) application_name wins: operators tell their nodes apart by it.
        fallback_application_name: PG_APPLICATION_NAME,
        keepAlive: true,
        connectionTimeoutMillis: PG_CONNECT_TIMEOUT_MS,
        ...(queryTimeoutMs > 0 ? { query_timeout: queryTimeoutMs } : {}),
      } as Knex.PgConnectionConfig,
      searchPath: [opts.databaseSchema],
      pool: {
        min: 0,
        max: 10,
        // A connection whose query timed out is still waiting for the server's answer: it is closed when next
        // taken, and a new one serves instead, so a server that stopped answering on some connections (a hung
        // backend, a network path lost) does not keep failing requests through them.
        validate: (conn: { readyForQuery?: boolean }) => conn.readyForQuery === true,
      },
    });
    knex = knexFactory(pg(opts.queryTimeoutMs ?? 30_000));
    unlimited = () => knexFactory(pg(0));
  } else {
    dialect = 'sqlite';
    const busyMs = Math.trunc(opts.sqliteBusyTimeoutMs ?? 5000);
    fs.mkdirSync(opts.dataDir, { recursive: true });
    knex = knexFactory({
      client: ImmediateSqliteClient as unknown as typeof knexFactory.Client,
      connection: { filename: path.join(opts.dataDir, 'service.sqlite') },
      useNullAsDefault: true,
      pool: {
        min: 1,
        max: SQLITE_CONNECTIONS,
        afterCreate(conn: { exec(sql: string, cb: (err: Error | null) => void): void }, done: (err: Error | null, conn: unknown) => void) {
          conn.exec(`PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON; PRAGMA busy_timeout = ${busyMs};`, (err) => done(err, conn));
        },
      },
    });
  }
  const migrator = { migrationSource, tableName: 'knex_migrations', ...(dialect === 'pg' ? { schemaName: opts.databaseSchema } : {}) };
  const withUnlimited = async <T>(work: (k: Knex) => Promise<T>): Promise<T> => {
    if (unlimited === undefined) return work(knex);
    const k = unlimited();
    try {
      return await work(k);
    } finally {
      await k.destroy();
    }
  };

  return {
    knex,
    dialect,
    async ping() {
      await knex.raw('select 1');
    },
    async migrate() {
      return withUnlimited(async (k) => {
        if (dialect === 'pg') await k.raw('create schema if not exists ??', [opts.databaseSchema]);
        const [, applied] = (await k.migrate.latest(migrator)) as [number, string[]];
        return applied;
      });
    },
    async rollbackAll() {
      return withUnlimited(async (k) => {
        const [, reverted] = (await k.migrate.rollback(migrator, true)) as [number, string[]];
        return reverted;
      });
    },
    async close() {
      await knex.destroy();
    },
  };
}

/** Current time as the ISO 8601 UTC string every `*_at` column holds. */
export function isoNow(now: number = Date.now()): string {
  return new Date(now).toISOString();
}

/** The UTC calendar day of `now` (epoch ms), YYYY-MM-DD: the form every `day`/`date` column holds. */
export const utcDay = (now: number): string => isoNow(now).slice(0, 10);

/** One day in milliseconds. */
export const DAY_MS = 86_400_000;

/** sqlite returns 0/1 for booleans, PostgreSQL true/false. */
export function bool(v: unknown): boolean {
  return v === true || v === 1 || v === '1';
}
