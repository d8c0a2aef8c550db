// Group commit on both stores: queued writes share a transaction, a failing write fails alone, order is kept.
import t from 'tap';
import { openStore } from '../../engine/db/store.js';
import { GroupCommit } from '../../engine/db/group-commit.js';
import { STORES, storeEnv } from '../helpers/stores.js';

for (const kind of STORES) {
  t.test(`group commit on ${kind}`, async (t) => {
    const env = storeEnv(t, kind);
    const store = openStore({ dataDir: t.testdir(), databaseUrl: env.DATABASE_URL, databaseSchema: env.DATABASE_SCHEMA ?? 'public' });
    t.teardown(() => store.close());
    await store.migrate();
    await store.knex.schema.createTable('gc_items', (tb) => {
      tb.integer('n').primary();
      tb.text('v').notNullable();
    });
    const begins: string[] = [];
    store.knex.on('query', (q: { sql: string }) => {
      if (/^begin/i.test(q.sql.trim()) || q.sql === 'BEGIN;') begins.push(q.sql);
    });
    // The group's writes go in one statement, as the transcript tail writes do: one bad row fails it for all.
    const group = new GroupCommit<{ n: number; v: string | null }>(store.knex, async (run, ops) => {
      await run(`INSERT INTO gc_items (n, v) VALUES ${ops.map(() => '(?, ?)').join(', ')}`, ops.flatMap((op) => [op.n, op.v]));
      return ops.map(() => undefined);
    });

    const first = group.submit({ n: 1, v: 'a' });
    // Submitted while the first transaction runs: they share the next one; n = 3 violates NOT NULL.
    const rest = [2, 3, 4, 5].map((n) => group.submit({ n, v: n === 3 ? null : String(n) }).then(() => 'ok', (e: Error) => e.message));
    await first;
    const outcomes = await Promise.all(rest);
    t.same(outcomes.map((o) => (o === 'ok' ? 'ok' : 'failed')), ['ok', 'failed', 'ok', 'ok'], 'only the bad write fails');
    const rows = (await store.knex('gc_items').orderBy('n')) as { n: number; v: string }[];
    t.same(rows.map((r) => Number(r.n)), [1, 2, 4, 5], 'the others are committed');

    begins.length = 0;
    const many = Array.from({ length: 20 }, (_, i) => group.submit({ n: 100 + i, v: 'x' }));
    await Promise.all(many);
    t.ok(begins.length <= 2, `20 queued writes took ${begins.length} transactions`);
    t.equal(Number(((await store.knex('gc_items').count({ c: '*' }).first()) as { c: number | string }).c), 24);
  });
}
