// insertStatements(): rows of any count stored exactly as knex's own insert stores them, on sqlite and PostgreSQL, and
// on sqlite with one statement text whatever the count (every text is kept prepared on each connection).
import t from 'tap';
import { insertStatements, writeTransaction, type RowValue } from '../../../engine/db/prepared.js';
import { STORES, openTestStore } from '../../helpers/stores.js';

const COLUMNS = ['k', 'n', 'text', 'score', 'count', 'flag', 'maybe'] as const;

for (const kind of STORES) {
  t.test(`insertStatements on ${kind}`, async (t) => {
    const store = openTestStore(t, kind);
    await store.migrate();
    for (const table of ['rows_ours', 'rows_knex']) {
      await store.knex.schema.createTable(table, (tb) => {
        tb.string('k', 16).notNullable();
        tb.integer('n').notNullable();
        tb.text('text').notNullable();
        tb.double('score').notNullable();
        tb.integer('count').nullable();
        tb.boolean('flag').notNullable();
        tb.string('maybe', 32).nullable();
        tb.primary(['k', 'n']);
      });
    }
    const sqlTexts = new Set<string>();
    store.knex.on('query', (q: { sql: string }) => {
      if (q.sql.startsWith('INSERT INTO rows_ours')) sqlTexts.add(q.sql);
    });

    const row = (k: string, n: number, text = `segment ${n} of ${k}: "quoted", back\\slash`): RowValue[] => [k, n, text, n * 1.5, n % 3 === 0 ? null : n, n % 2 === 0, n % 4 === 0 ? null : `m${n}`];
    const batches: RowValue[][][] = [1, 2, 3, 7, 50, 51, 130].map((count) => Array.from({ length: count }, (_, n) => row(`b${count}`, n)));
    // Text sqlite's JSON functions would cut (U+0000; PostgreSQL text cannot hold it) or change (a lone surrogate).
    const odd = `tab\t, newline\n, \u0001, é, 😀, \u2028, lone \ud800 high${kind === 'sqlite' ? ', nul \u0000 inside' : ''}`;
    batches.push([row('odd', 0), row('odd', 1, odd), row('odd', 2, '')]);
    // JSON has no infinities.
    const infinite = row('inf', 1);
    infinite[3] = -Infinity;
    batches.push([row('inf', 0), infinite]);

    for (const rows of batches) {
      await writeTransaction(store.knex, async (run) => {
        for (const [sql, bindings] of insertStatements(run.sqlite, 'rows_ours', COLUMNS, rows)) await run(sql, bindings);
      });
      await store.knex('rows_knex').insert(rows.map((r) => Object.fromEntries(COLUMNS.map((c, i) => [c, r[i]]))));
    }
    const read = (table: string) => store.knex(table).select(...COLUMNS).orderBy([{ column: 'k' }, { column: 'n' }]);
    const ours = await read('rows_ours');
    t.equal(ours.length, batches.reduce((a, b) => a + b.length, 0), 'every row stored');
    t.same(ours, await read('rows_knex'), 'the same values, of the same types, as knex stores');
    t.equal((ours as { text: string }[]).find((r) => r.text.startsWith('tab'))?.text, odd.replace('\ud800', '\ufffd'), 'odd text kept (a lone surrogate becomes U+FFFD, as bound text does)');
    t.equal(Number((ours as { k: string; n: number; score: number }[]).find((r) => r.k === 'inf' && r.n === 1)?.score), -Infinity, 'an infinite number kept');
    if (kind === 'sqlite') {
      const json = [...sqlTexts].filter((s) => s.includes('json_each'));
      t.equal(json.length, 1, 'one statement text for batches of 1 to 130 rows');
      t.equal(sqlTexts.size, 2, 'and the one-row VALUES text for the odd batches, row by row');
    }

    // A suffix: ON CONFLICT adds to the row there.
    const upsert = async (rows: RowValue[][]) =>
      writeTransaction(store.knex, async (run) => {
        for (const [sql, bindings] of insertStatements(run.sqlite, 'rows_ours', COLUMNS, rows, 'ON CONFLICT (k, n) DO UPDATE SET score = rows_ours.score + excluded.score')) await run(sql, bindings);
      });
    await upsert([row('up', 0), row('up', 1)]);
    await upsert([row('up', 1), row('up', 2)]);
    const up = (await store.knex('rows_ours').where('k', 'up').orderBy('n')) as { score: number }[];
    t.same(up.map((r) => Number(r.score)), [0, 3, 3], 'ON CONFLICT applied per row');
    t.same(insertStatements(kind === 'sqlite', 'rows_ours', COLUMNS, []), [], 'no rows: no statement');
  });
}

