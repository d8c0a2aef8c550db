// Group commit on both stores: queued writes share a transaction, a failing write fails alone, order is kept; the
// backlog (how long the oldest uncommitted write has waited) is read on the injected clock; a store that cannot begin
// (sqlite locked by another connection) fails a group once.
import t from 'tap';
import { ManualClock } from '../../../engine/clock.js';
import { openStore } from '../../../engine/db/store.js';
import { GroupCommit } from '../../../engine/db/group-commit.js';
import { STORES, openTestStore } from '../../helpers/stores.js';
import { sqliteWriteLock } from '../../helpers/sqlite-lock.js';

for (const kind of STORES) {
  t.test(`group commit on ${kind}`, async (t) => {
    const store = openTestStore(t, kind);
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
    const rest = [2, 3, 4, 5].map((n) => group.submit({ n, v: n === 3 ? null : String(n) }).then(() => 'ok', () => 'failed'));
    await first;
    const outcomes = await Promise.all(rest);
    t.same(outcomes, ['ok', 'failed', 'ok', 'ok'], 'only the bad write fails');
    const rows = (await store.knex('gc_items').orderBy('n')) as { n: number; v: string }[];
    t.same(rows.map((r) => Number(r.n)), [1, 2, 4, 5], 'the others are committed');

    begins.length = 0;
    const many = Array.from({ length: 20 }, (_, i) => group.submit({ n: 100 + i, v: 'x' }));
    await Promise.all(many);
    t.ok(begins.length <= 2, `20 queued writes took ${begins.length} transactions`);
    t.equal(Number(((await store.knex('gc_items').count({ c: '*' }).first()) as { c: number | string }).c), 24);
  });
}

t.test('the backlog: the oldest write not yet committed, by the injected clock, and the writes pending, back to 0 once all are', async (t) => {
  const store = openStore({ dataDir: t.testdir(), databaseUrl: undefined, databaseSchema: 'public' });
  t.teardown(() => store.close());
  await store.migrate();
  const clock = new ManualClock();
  // Each transaction waits inside its statements until the test lets it commit.
  const held: (() => void)[] = [];
  let onHold: (() => void) | undefined;
  const group = new GroupCommit<number>(store.knex, async (_run, ops) => {
    await new Promise<void>((r) => {
      held.push(r);
      onHold?.();
    });
    return ops.map(() => undefined);
  }, 64, () => clock.now());
  const holding = (): Promise<void> => new Promise((r) => (held.length > 0 ? r() : (onHold = r)));
  t.equal(group.backlogMs(), 0, 'nothing waiting');
  t.equal(group.pending(), 0);
  const first = group.submit(1);
  await holding();
  clock.advance(1500);
  const second = group.submit(2); // queued behind the running transaction
  clock.advance(1000);
  t.equal(group.backlogMs(), 2500, 'the first write, still being committed, has waited 2.5 s');
  t.equal(group.pending(), 2, 'the write being committed and the one queued behind it');
  held.shift()!();
  await first;
  await holding();
  t.equal(group.backlogMs(), 1000, 'the first committed: the second, submitted 1 s ago and now being committed, is the oldest');
  t.equal(group.pending(), 1);
  clock.advance(500);
  t.equal(group.backlogMs(), 1500);
  held.shift()!();
  await second;
  t.equal(group.backlogMs(), 0, 'all committed');
  t.equal(group.pending(), 0);
});

t.test('a store that cannot begin fails the whole group at once, not each write again alone', async (t) => {
  const dir = t.testdir();
  const store = openStore({ dataDir: dir, databaseUrl: undefined, databaseSchema: 'public', sqliteBusyTimeoutMs: 50 });
  t.teardown(() => store.close());
  await store.migrate();
  await store.knex.schema.createTable('gc_lock', (tb) => tb.integer('n').primary());
  let applied = 0;
  const group = new GroupCommit<number>(store.knex, async (run, ops) => {
    applied++;
    await run(`INSERT INTO gc_lock (n) VALUES ${ops.map(() => '(?)').join(', ')}`, [...ops]);
    return ops.map(() => undefined);
  });
  // Another connection holds sqlite's write lock past the 50 ms busy timeout.
  const lock = sqliteWriteLock(t, dir);
  await lock.hold();
  const first = group.submit(1).catch((e: unknown) => e);
  const rest = [2, 3, 4].map((n) => group.submit(n).catch((e: unknown) => e));
  const errors = await Promise.all([first, ...rest]);
  t.match(errors[0], { code: 'SQLITE_BUSY' }, 'the write waiting alone fails with SQLITE_BUSY');
  t.match(errors[1], { code: 'SQLITE_BUSY' }, 'so does the group queued behind it');
  t.ok(errors[2] === errors[1] && errors[3] === errors[1], "the group's writes share its one failure (not retried one by one)");
  t.equal(applied, 0, 'no transaction began');
  await lock.release();
  await Promise.all([5, 6].map((n) => group.submit(n)));
  t.same((await store.knex('gc_lock').orderBy('n')).map((r: { n: number }) => r.n), [5, 6], 'writes go through once the lock is let go');
});
