// Usage rows on sqlite and PostgreSQL: the upsert adds up across calls and nodes, days split at UTC midnight, reads by range.
import t from 'tap';
import client from 'prom-client';
import { UsageRepository } from '../../../engine/db/usage.js';
import { UsageRecorder } from '../../../engine/stt/usage.js';
import { createLogger } from '../../../engine/logger.js';
import { STORES, openTestStore } from '../../helpers/stores.js';

const MIDNIGHT = Date.UTC(2026, 10, 24);

for (const kind of STORES) {
  t.test(`usage on ${kind}`, async (t) => {
    const store = openTestStore(t, kind);
    await store.migrate();
    const usage = new UsageRepository(store.knex);

    await t.test('the repository adds to existing rows', async (t) => {
      await usage.add([{ uid: 'u1', day: '2026-11-23', provider: 'local', audioSeconds: 1.5, words: 3 }]);
      await usage.add([
        { uid: 'u1', day: '2026-11-23', provider: 'local', audioSeconds: 2.25, words: 4 },
        { uid: 'u1', day: '2026-11-23', provider: 'local', audioSeconds: 0.25, words: 1 },
        { uid: 'u1', day: '2026-11-23', provider: 'custom', audioSeconds: 10, words: 20 },
        { uid: 'u2', day: '2026-11-23', provider: 'local', audioSeconds: 7, words: 7 },
      ]);
      // Two writers at once (two nodes): neither increment is lost.
      await Promise.all([1, 2, 3, 4].map(() => usage.add([{ uid: 'u1', day: '2026-11-23', provider: 'custom', audioSeconds: 1, words: 1 }])));
      t.same(await usage.list('u1', '2026-11-01', '2026-11-30'), [
        { day: '2026-11-23', provider: 'custom', audioSeconds: 14, words: 24 },
        { day: '2026-11-23', provider: 'local', audioSeconds: 4, words: 8 },
      ]);
      t.same(await usage.list('u1', '2026-11-24', '2026-11-30'), [], 'range bounds apply');
      await usage.add([]);
    });

    await t.test('a batch of many users is written whole, in several statements', async (t) => {
      // 701 rows: 256 + 256 + 128 + 32 + 16 + 8 + 4 + 1 per statement; each added once, none twice.
      const batch = Array.from({ length: 700 }, (_, i) => ({ uid: `many-${i}`, day: '2026-11-20', provider: 'local', audioSeconds: i / 4, words: i }));
      await usage.add([...batch, { uid: 'u1', day: '2026-11-23', provider: 'local', audioSeconds: 1, words: 2 }]);
      for (const i of [0, 255, 256, 511, 512, 639, 699]) {
        t.same(await usage.list(`many-${i}`, '2026-11-20', '2026-11-20'), [{ day: '2026-11-20', provider: 'local', audioSeconds: i / 4, words: i }], `row ${i}`);
      }
      const [{ n }] = (await store.knex('stt_usage').where('uid', 'like', 'many-%').count({ n: '*' })) as [{ n: number | string }];
      t.equal(Number(n), 700);
      t.same(await usage.list('u1', '2026-11-23', '2026-11-23'), [
        { day: '2026-11-23', provider: 'custom', audioSeconds: 14, words: 24 },
        { day: '2026-11-23', provider: 'local', audioSeconds: 5, words: 10 },
      ], 'an existing row in the batch is added to');

      // A row the store refuses in a later statement: the earlier statements' rows do not count either.
      const refused = Array.from({ length: 300 }, (_, i) => ({ uid: i === 290 ? (null as unknown as string) : `roll-${i}`, day: '2026-11-20', provider: 'local', audioSeconds: 1, words: 1 }));
      await t.rejects(usage.add(refused));
      const [{ m }] = (await store.knex('stt_usage').where('uid', 'like', 'roll-%').count({ m: '*' })) as [{ m: number | string }];
      t.equal(Number(m), 0, 'all or nothing');
    });

    await t.test('the recorder batches records and splits days at UTC midnight', async (t) => {
      const registry = new client.Registry();
      const recorder = new UsageRecorder({ repository: usage, registry, logger: createLogger('silent') });
      recorder.record({ uid: 'u3', provider: 'provider_a', audioSeconds: 30, words: 50, at: MIDNIGHT - 1 });
      recorder.record({ uid: 'u3', provider: 'provider_a', audioSeconds: 12.5, words: 20, at: MIDNIGHT });
      recorder.record({ uid: 'u3', provider: 'provider_a', audioSeconds: 0.5, words: 1, at: MIDNIGHT + 86_399_999 });
      recorder.record({ uid: 'u3', provider: 'provider_a', audioSeconds: 0, words: 0, at: MIDNIGHT });
      recorder.record({ uid: 'u3', provider: 'provider_a', audioSeconds: Number.NaN, words: 1, at: MIDNIGHT });
      recorder.record({ uid: 'u3', provider: 'provider_a', audioSeconds: 1, words: 1.5, at: MIDNIGHT });
      recorder.record({ uid: '', provider: 'provider_a', audioSeconds: 1, words: 1, at: MIDNIGHT });
      await recorder.flush();
      t.equal(recorder.stats.refused, 3, 'malformed records are refused');
      t.equal(recorder.stats.writes, 1, 'one write carried the whole turn');
      recorder.record({ uid: 'u3', provider: 'provider_a', audioSeconds: 1, words: 2, at: MIDNIGHT + 1000 });
      await recorder.flush();
      t.same(await usage.list('u3', '2026-11-23', '2026-11-25'), [
        { day: '2026-11-23', provider: 'provider_a', audioSeconds: 30, words: 50 },
        { day: '2026-11-24', provider: 'provider_a', audioSeconds: 14, words: 23 },
      ]);
      const metrics = await registry.metrics();
      t.match(metrics, /stt_audio_seconds_total\{provider="provider_a"\} 44/);
      t.match(metrics, /stt_words_total\{provider="provider_a"\} 73/);
    });

    await t.test('a failed write keeps the rows for the next attempt', async (t) => {
      // Down for the write record() starts and for the retry flush() makes.
      let failures = 2;
      const flaky = {
        add: async (rows: Parameters<UsageRepository['add']>[0]) => {
          if (failures > 0) {
            failures--;
            throw new Error('store down');
          }
          return usage.add(rows);
        },
      } as unknown as UsageRepository;
      const recorder = new UsageRecorder({ repository: flaky, registry: new client.Registry(), logger: createLogger('silent') });
      recorder.record({ uid: 'u4', provider: 'local', audioSeconds: 2, words: 2, at: MIDNIGHT });
      await t.rejects(recorder.flush(), 'the caller hears the store refused it');
      t.equal(recorder.pendingRows, 1, 'still queued');
      recorder.record({ uid: 'u4', provider: 'local', audioSeconds: 3, words: 3, at: MIDNIGHT });
      await recorder.close();
      t.equal(recorder.pendingRows, 0);
      t.same(await usage.list('u4', '2026-11-24', '2026-11-24'), [{ day: '2026-11-24', provider: 'local', audioSeconds: 5, words: 5 }], 'counted once, nothing lost');
    });
  });
}
