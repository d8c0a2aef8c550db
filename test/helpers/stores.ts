// Store fixtures: every store test runs on sqlite (a file in the test's own dir) and on PostgreSQL (a schema of its own).
import { randomUUID } from 'node:crypto';
import knexFactory from 'knex';
import type { Test } from 'tap';
import { openStore, type Store } from '../../engine/db/store.js';

/** PostgreSQL used by the suite; override with TEST_DATABASE_URL. */
export const PG_URL = process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

export const STORES = ['sqlite', 'pg'] as const;
export type StoreKind = (typeof STORES)[number];

/** Environment for a store of `kind`: sqlite needs nothing (DATA_DIR decides); pg gets a fresh schema dropped at teardown. */
export function storeEnv(t: Test, kind: StoreKind): Record<string, string> {
  if (kind === 'sqlite') return {};
  const schema = `t_${randomUUID().replace(/-/g, '').slice(0, 20)}`;
  t.teardown(async () => {
    const k = knexFactory({ client: 'pg', connection: PG_URL });
    try {
      await k.raw('drop schema if exists ?? cascade', [schema]);
    } finally {
      await k.destroy();
    }
  });
  return { DATABASE_URL: PG_URL, DATABASE_SCHEMA: schema };
}

/** A store of `kind` for one test: sqlite in the test's own dir, or PostgreSQL in a schema of its own; closed at teardown. */
export function openTestStore(t: Test, kind: StoreKind): Store {
  const env = storeEnv(t, kind);
  const store = openStore({ dataDir: t.testdir(), databaseUrl: env.DATABASE_URL, databaseSchema: env.DATABASE_SCHEMA ?? 'public' });
  t.teardown(() => store.close());
  return store;
}
