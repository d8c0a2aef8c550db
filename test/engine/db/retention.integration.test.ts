// The retention sweep on both stores: logs older than their retention go, newer ones and records still in use stay,
// and a backlog larger than one step is pruned whole; the operator's periods, 0 keeping rows; and the hourly sweep of
// a jobs node seen through the API.
import t from 'tap';
import { openTestStore, STORES } from '../../helpers/stores.js';
import { startService } from '../../helpers/service.js';
import { bearer } from '../../helpers/http.js';
import { isoNow } from '../../../engine/db/store.js';
import { Retention, RETENTION_CHUNK, retentionRules } from '../../../engine/db/retention.js';
import { DeletedAccounts } from '../../../engine/db/accounts.js';

const DAY = 24 * 3600_000;
const NOW = Date.UTC(2026, 11, 1, 12);

for (const kind of STORES) {
  t.test(`${kind}: old logs are deleted, recent ones and those still in use are kept`, async (t) => {
    const store = openTestStore(t, kind);
    await store.migrate();
    const k = store.knex;
    const at = (daysAgo: number): string => isoNow(NOW - daysAgo * DAY);
    const delivery = (id: string, state: string, daysAgo: number): Record<string, unknown> => ({
      id, owner_kind: 'user', owner_id: 'u1', uid: 'u1', event_type: 'memory_created', subject_id: 'c1', state, created_at: at(daysAgo), updated_at: at(daysAgo),
    });
    // A backlog over one step of old delivered rows, and rows each rule must keep.
    const backlog = Array.from({ length: RETENTION_CHUNK + 5 }, (_, i) => delivery(`old-${i}`, 'delivered', 31));
    for (let i = 0; i < backlog.length; i += 200) await k('webhook_deliveries').insert(backlog.slice(i, i + 200));
    await k('webhook_deliveries').insert([delivery('old-failed', 'failed', 40), delivery('old-retrying', 'retrying', 40), delivery('recent', 'delivered', 29)]);
    await k('app_replies').insert([
      { id: 'r-old', uid: 'u1', session_id: 's', kind: 'message', reply: '{}', received_at: at(31) },
      { id: 'r-new', uid: 'u1', session_id: 's', kind: 'message', reply: '{}', received_at: at(1) },
    ]);
    await k('proactive_notifications').insert([
      { uid: 'u1', reply_id: 'r-old', session_id: 's', trigger: 'reply', outcome: 'sent', created_at: at(31) },
      { uid: 'u1', reply_id: 'r-new', session_id: 's', trigger: 'reply', outcome: 'sent', created_at: at(1) },
    ]);
    await k('owner_notifications').insert([
      { uid: 'u1', kind: 'webhook_disabled', detail: '{}', created_at: at(31), sent_at: at(31) },
      { uid: 'u1', kind: 'webhook_disabled', detail: '{"unsent":true}', created_at: at(31), sent_at: null },
    ]);
    await k('notifications').insert([
      { uid: 'u1', source: 'system', title: 'old', body: 'b', data: '{}', created_at: at(91) },
      { uid: 'u1', source: 'system', title: 'kept', body: 'b', data: '{}', created_at: at(60) },
    ]);
    await k('sync_jobs').insert([
      { id: 'j-done', user_id: 'u1', status: 'completed', files: '[]', created_at: at(31), updated_at: at(31) },
      { id: 'j-queued', user_id: 'u1', status: 'queued', files: '[]', created_at: at(31), updated_at: at(31) },
    ]);
    const deletions = new DeletedAccounts(k);
    await deletions.record('gone-long-ago', NOW - 31 * DAY);
    await deletions.record('gone-lately', NOW - 29 * DAY);

    const deleted = await new Retention(k).sweep(NOW);
    t.same(Object.fromEntries(deleted), {
      webhook_deliveries: RETENTION_CHUNK + 6,
      app_replies: 1,
      proactive_notifications: 1,
      owner_notifications: 1,
      notifications: 1,
      sync_jobs: 1,
      deleted_accounts: 1,
    });
    const ids = async (table: string, col = 'id'): Promise<unknown[]> => (await k(table).select(col).orderBy(col)).map((r: Record<string, unknown>) => r[col]);
    t.same(await ids('webhook_deliveries'), ['old-retrying', 'recent'], 'a delivery still under way stays however old; a recent one stays');
    t.same(await ids('app_replies'), ['r-new']);
    t.same(await ids('proactive_notifications', 'reply_id'), ['r-new']);
    t.same(await ids('owner_notifications', 'detail'), ['{"unsent":true}'], 'a notice its owner was not yet sent stays');
    t.same(await ids('notifications', 'title'), ['kept'], 'notifications are kept 90 days');
    t.same(await ids('sync_jobs'), ['j-queued'], 'a job not finished stays');
    t.equal(await deletions.deletedAt('gone-long-ago'), undefined, 'an account deleted 31 days ago is forgotten');
    t.equal(await deletions.deletedAt('gone-lately'), NOW - 29 * DAY, 'one deleted 29 days ago is remembered');
    t.same(Object.fromEntries(await new Retention(k).sweep(NOW)), {}, 'a second sweep finds nothing');
  });
}

t.test('a jobs node prunes every hour: a notification past 90 days leaves the outbox, counted in /metrics', async (t) => {
  const ts = await startService(t);
  const notify = (title: string) => ts.service.services.notifier.notify('u-ret', { title, body: 'b', data: {}, source: 'system' });
  await notify('from long ago');
  ts.clock.advance(89 * DAY);
  await notify('recent');
  const titles = async (): Promise<string[]> => ((await ts.req('/v1/notifications', { headers: bearer(await ts.token('u-ret')) })).json as { title: string }[]).map((n) => n.title);
  t.same(await titles(), ['recent', 'from long ago']);

  ts.clock.advance(2 * DAY);
  await ts.service.scheduler.tick();
  t.same(await titles(), ['recent'], 'past 90 days: gone at the next hourly sweep');
  const line = (await (await fetch(`${ts.url}/metrics`)).text()).split('\n').find((l) => l.startsWith('retention_deleted_total{table="notifications"}'));
  t.equal(Number(line?.split(' ')[1]), 1, 'counted in /metrics');
});

t.test("the operator's periods: 0 keeps the logs, a shorter one prunes sooner", async (t) => {
  const store = openTestStore(t, 'sqlite');
  await store.migrate();
  const k = store.knex;
  const at = (daysAgo: number): string => isoNow(NOW - daysAgo * DAY);
  await k('webhook_deliveries').insert({ id: 'ancient', owner_kind: 'user', owner_id: 'u1', uid: 'u1', event_type: 'memory_created', subject_id: 'c1', state: 'delivered', created_at: at(400), updated_at: at(400) });
  await k('notifications').insert([
    { uid: 'u1', source: 'system', title: 'eight days', body: 'b', data: '{}', created_at: at(8) },
    { uid: 'u1', source: 'system', title: 'six days', body: 'b', data: '{}', created_at: at(6) },
  ]);
  const deleted = await new Retention(k, retentionRules({ logs: 0, notifications: 7 })).sweep(NOW);
  t.same(Object.fromEntries(deleted), { notifications: 1 });
  t.same((await k('webhook_deliveries').select('id')).map((r: { id: string }) => r.id), ['ancient'], 'LOG_RETENTION_DAYS=0 keeps the delivery log');
  t.same((await k('notifications').select('title')).map((r: { title: string }) => r.title), ['six days']);
  t.ok(retentionRules({ logs: 0, notifications: 0 }).every((r) => r.table === 'deleted_accounts'), 'the record of deleted accounts is pruned whatever the settings');
});

t.test('NOTIFICATION_RETENTION_DAYS set on a jobs node', async (t) => {
  const ts = await startService(t, { env: { NOTIFICATION_RETENTION_DAYS: '7' } });
  await ts.service.services.notifier.notify('u-week', { title: 'last week', body: 'b', data: {}, source: 'system' });
  const titles = async (): Promise<string[]> => ((await ts.req('/v1/notifications', { headers: bearer(await ts.token('u-week')) })).json as { title: string }[]).map((n) => n.title);
  ts.clock.advance(6 * DAY);
  await ts.service.scheduler.tick();
  t.same(await titles(), ['last week'], 'kept for 7 days');
  ts.clock.advance(2 * DAY);
  await ts.service.scheduler.tick();
  t.same(await titles(), [], 'gone at the first sweep after');
});
