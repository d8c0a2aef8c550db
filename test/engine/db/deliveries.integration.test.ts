// The delivery log on both stores: rows and attempts written together (group commit) each land on their own row, a
// delivered attempt stamps delivered_at and a later one keeps it, and inserting a known id changes nothing.
import t from 'tap';
import { ManualClock } from '../../../engine/clock.js';
import { DeliveriesRepository, type NewDelivery } from '../../../engine/db/deliveries.js';
import { STORES, openTestStore } from '../../helpers/stores.js';

for (const kind of STORES) {
  t.test(`the delivery log on ${kind}`, async (t) => {
    const store = openTestStore(t, kind);
    await store.migrate();
    const clock = new ManualClock(Date.parse('2026-12-02T10:00:00Z'));
    const log = new DeliveriesRepository(store.knex, () => clock.now());
    const rows: NewDelivery[] = Array.from({ length: 40 }, (_, i) => ({
      id: `msg_${String(i).padStart(32, '0')}`, ownerKind: i % 2 ? 'app' : 'user', ownerId: `o${i}`, uid: 'u1', eventType: 'memory_created', subjectId: `c${i}`, reprocess: i === 3,
    }));
    await Promise.all(rows.map((r) => log.insert([r])));
    await log.insert([{ ...rows[0]!, subjectId: 'other' }]);
    t.equal((await log.get(rows[0]!.id))?.subjectId, 'c0', 'a known id is left as it was');
    t.equal((await log.get(rows[3]!.id))?.reprocess, true);

    clock.advance(1000);
    await Promise.all(rows.map((r, i) => log.recordAttempt(r.id, {
      state: i % 3 === 0 ? 'delivered' : 'retrying', attempts: 1, lastStatus: i % 3 === 0 ? 200 : 500 + (i % 4), lastError: null,
      lastLatencyMs: i + 0.4, nextAttemptAt: i % 3 === 0 ? null : clock.now() + 5000, bodyBytes: 100 + i,
    })));
    for (const [i, r] of rows.entries()) {
      const d = (await log.get(r.id))!;
      const delivered = i % 3 === 0;
      t.match(d, { state: delivered ? 'delivered' : 'retrying', attempts: 1, lastStatus: delivered ? 200 : 500 + (i % 4), lastLatencyMs: i, bodyBytes: 100 + i, subjectId: `c${i}` }, `row ${i}`);
      t.equal(d.nextAttemptAt, delivered ? null : '2026-12-02T10:00:06.000Z');
      t.equal(d.deliveredAt, delivered ? '2026-12-02T10:00:01.000Z' : null);
    }

    clock.advance(1000);
    await Promise.all([0, 3].map((i) => log.recordAttempt(rows[i]!.id, { state: 'failed', attempts: 2, lastStatus: 400, lastError: null, lastLatencyMs: 1, nextAttemptAt: null, bodyBytes: 1 })));
    t.equal((await log.get(rows[0]!.id))?.deliveredAt, '2026-12-02T10:00:01.000Z', 'a later attempt keeps delivered_at');
    t.match(await log.get(rows[3]!.id), { state: 'failed', attempts: 2, lastStatus: 400 });

    // What an attempt reads first: each delivery exactly as get() reads it, with its endpoint's health.
    await log.recordFailure({ ownerKind: 'app', ownerId: 'o1', eventType: 'memory_created' }, clock.now(), 1, clock.now() + 60_000);
    const views = await log.attemptViews([...rows.map((r) => r.id), 'msg_none']);
    t.equal(views.size, rows.length, 'an unknown id is absent');
    for (const r of rows) t.strictSame(views.get(r.id)!.delivery, await log.get(r.id), `view of ${r.id}`);
    t.strictSame(views.get(rows[1]!.id)!.health, { consecutiveFailures: 1, circuitOpenUntil: '2026-12-02T10:01:02.000Z' });
    t.strictSame(views.get(rows[2]!.id)!.health, { consecutiveFailures: 0, circuitOpenUntil: null });
    t.match(views.get(rows[2]!.id)!, { url: undefined, secret: undefined }, 'no endpoint or secret stored');
  });
}
