// Deleting an account over the API, on sqlite and PostgreSQL: two users with data of every kind (keys, conversations,
// memories, goals, people and voice samples, apps, webhooks and deliveries, notifications, day summaries, sync jobs and
// uploads); one deletes their account while a live session of theirs is open on another node. It closes with 4410,
// no row of any table holds anything of theirs, their keys and the ID token they held stop working at once on every
// node, and the other user keeps everything.
import t from 'tap';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startService } from '../helpers/service.js';
import { STORES } from '../helpers/stores.js';
import { bearer } from '../helpers/http.js';
import { ManualClock } from '../../engine/clock.js';
import { Client, seed } from '../helpers/isolation.js';
import { receiver } from '../helpers/webhooks.js';
import { voice, SENTENCES } from '../helpers/voices.js';
import { connect, open } from '../helpers/listen.js';
import { CloseCode } from '../../engine/protocol.js';

t.setTimeout(300_000);

for (const store of STORES) {
  t.test(`${store}: an account deleted leaves nothing of its user's and all of everyone else's`, async (t) => {
    const clock = new ManualClock(Date.parse('2026-11-20T15:00:00Z'));
    const rx = await receiver(t);
    const ts = await startService(t, { clock, store, env: { WEBHOOK_ALLOW_PRIVATE: 'on', RATE_LIMIT_PER_MINUTE: '10000000', RATE_LIMIT_PER_DAY: '1000000000' } });
    const c = new Client(ts.url);
    t.teardown(() => c.close());
    const dir = mkdtempSync(path.join(tmpdir(), 'account-deletion-'));
    t.teardown(() => rmSync(dir, { recursive: true, force: true }));
    const sample = voice(dir, 'sample', 'en-us+m3', SENTENCES[0]!);
    const a = await seed(ts, c, 'leaving-user', 'leaving-canary-3k', rx.url, sample);
    const b = await seed(ts, c, 'staying-user', 'staying-canary-3k', rx.url, sample);
    t.teardown(() => {
      a.closeSse();
      b.closeSse();
    });
    // B installed A's public app: that install goes with the app.
    t.equal((await c.send({ method: 'POST', path: `/v1/apps/${a.public_app_id}/install`, headers: bearer(b.token) })).status, 200);
    // A's live session is on another node than the one asked to delete the account.
    const other = await startService(t, { clock, sameDeploymentAs: ts, env: { WEBHOOK_ALLOW_PRIVATE: 'on' } });
    const session = await open(other, { uid: a.uid, language: 'en', sample_rate: '16000', codec: 'pcm16' }, a.token);
    const otherSession = await open(ts, { uid: b.uid, language: 'en', sample_rate: '16000', codec: 'pcm16' }, b.token);

    const res = await c.send({ method: 'DELETE', path: '/v1/users/delete-account', headers: bearer(a.token) });
    t.equal(res.status, 200);
    t.same(res.json, { status: 'Ok' });
    t.same(await session.closed, { code: CloseCode.ACCOUNT_DELETED, reason: 'account deleted' }, 'the live session on the other node closed with 4410');

    // Every row of every table, as text: nothing of A's anywhere.
    const k = ts.service.services.store.knex;
    const tables: string[] = store === 'sqlite'
      ? (await k.raw("select name from sqlite_master where type = 'table' and name not like 'sqlite_%'")).map((r: { name: string }) => r.name)
      : (await k.raw('select table_name as name from information_schema.tables where table_schema = current_schema()')).rows.map((r: { name: string }) => r.name);
    t.ok(tables.length > 25, `${tables.length} tables`);
    const marks = [a.uid, a.canary, a.conversation_id, a.app_id, a.public_app_id, a.person_id, a.memory_id, a.goal_id, a.job_id];
    const left: string[] = [];
    let bRows = 0;
    for (const table of tables.filter((n) => !n.startsWith('knex_'))) {
      for (const row of await k(table).select('*')) {
        const text = JSON.stringify(row, (_k, v) => (Buffer.isBuffer(v) ? v.toString('latin1') : v));
        for (const m of marks) if (text.includes(m)) left.push(`${table}: ${m}`);
        if (text.includes(b.uid) || text.includes(b.canary)) bRows++;
      }
    }
    t.same(left, [], 'no row of any table holds anything of the deleted user');
    t.ok(bRows > 20, `the other user's ${bRows} rows are all there`);

    // A's keys are refused at once, and so is the ID token A held, on either node: a device told to go that
    // reconnects with it does not start a new account.
    for (const key of [a.devKey, a.mcpKey]) t.equal((await c.send({ method: 'GET', path: '/v1/dev/user/memories', headers: bearer(key) })).status, 401, 'a deleted account\'s key is refused');
    const stale = await c.send({ method: 'GET', path: '/v1/users/settings', headers: bearer(a.token) });
    t.equal(stale.status, 401, 'the ID token from before the deletion is refused');
    t.same(stale.json, { detail: 'This account was deleted; sign in again' });
    for (const node of [ts, other]) {
      const again = await connect(node, { uid: a.uid, language: 'en', sample_rate: '16000', codec: 'pcm16' }, a.token);
      t.equal(again.status, 401, 'a device reconnecting with it is refused');
      t.match(again.client === undefined ? again.body : '', /account was deleted/);
    }
    t.notOk(await k('users').where({ id: a.uid }).first(), 'and no account was made by trying');

    // Signing in again (a token issued after the deletion) starts an empty account.
    clock.advance(1000);
    const token = await ts.token(a.uid);
    t.equal((await c.send({ method: 'GET', path: `/v2/sync-local-files/uploads/${a.upload_id}`, headers: bearer(token) })).status, 404, 'the unfinished upload is gone');
    const settings = await c.send({ method: 'GET', path: '/v1/users/settings', headers: bearer(token) });
    t.equal(settings.json?.name, null, 'signing in again finds an empty account');
    const fresh = await ts.devKey(a.uid);
    t.same((await c.send({ method: 'GET', path: '/v1/dev/user/conversations', headers: bearer(fresh) })).json, [], 'with no conversations');

    // B keeps everything, and B's session was not touched.
    t.equal((await c.send({ method: 'GET', path: `/v1/dev/user/conversations/${b.conversation_id}`, headers: bearer(b.devKey) })).status, 200);
    t.ok(((await c.send({ method: 'GET', path: '/v1/dev/user/memories', headers: bearer(b.devKey) })).json as { id: string }[]).some((m) => m.id === b.memory_id));
    const bApps = (await c.send({ method: 'GET', path: '/v1/apps', headers: bearer(b.token) })).json as { id: string }[];
    t.ok(bApps.some((x) => x.id === b.public_app_id), "B's own app is there");
    t.notOk(bApps.some((x) => x.id === a.public_app_id), "A's app, which B had installed, is gone");
    let bOpen = true;
    void otherSession.closed.then(() => (bOpen = false));
    await new Promise((r) => setImmediate(r));
    t.ok(bOpen, "B's live session is still open");
    otherSession.close();

    t.equal((await c.send({ method: 'DELETE', path: '/v1/users/delete-account', headers: bearer(a.token) })).status, 200, 'deleting again, with the token from before, is harmless (a deletion cut short is finished so)');
    t.equal((await c.send({ method: 'GET', path: '/v1/dev/user/conversations', headers: bearer(fresh) })).status, 401, 'and it deleted the new account too');
    t.equal((await c.send({ method: 'DELETE', path: '/v1/users/delete-account', headers: bearer(a.devKey) })).status, 401, 'never with a developer key');
  });
}
