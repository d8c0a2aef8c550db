// Apps over real sockets, on sqlite and PostgreSQL: a developer's CRUD (another user's ids answer 404), the app
// secret shown once and replaced by rotation, installs checked against a local Setup Completed receiver, the scopes
// an install grants, and the endpoints the delivery code gets for a user and trigger.
import t, { type Test } from 'tap';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { startService, type TestService } from '../helpers/service.js';
import { bearer } from '../helpers/http.js';
import { STORES } from '../helpers/stores.js';
import { hashKey, parseKey } from '../../engine/identity/key-format.js';
import { webhookParts } from '../../engine/webhooks/parts.js';

const PUBLIC = 'https://93.184.215.14';

/** The Setup Completed receiver: answers by the `uid` it is asked about, and records every uid asked. */
async function setupReceiver(t: Test): Promise<{ url: string; asked: string[] }> {
  const asked: string[] = [];
  const server = http.createServer((req, res) => {
    const uid = new URL(req.url ?? '/', 'http://x').searchParams.get('uid') ?? '';
    asked.push(uid);
    if (uid === 'carol') {
      res.writeHead(500);
      res.end('boom');
    } else if (uid === 'dave') {
      res.writeHead(302, { location: 'http://127.0.0.1:9/done' });
      res.end();
    } else if (uid === 'erin') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"done": true}');
    } else {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ is_setup_completed: uid === 'bob' || uid === 'alice' }));
    }
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => server.close(() => r())));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/setup?app=1`, asked };
}

const integration = (extra: Record<string, unknown> = {}) => ({
  name: 'Notes sync',
  description: 'Sends your conversations to your notes',
  capabilities: ['external_integration'],
  external_integration: { triggers_on: 'memory_creation', webhook_url: `${PUBLIC}/hook?k=1`, auth_url: 'https://notes.example.org/connect', setup_instructions: 'https://notes.example.org/setup' },
  ...extra,
});

async function create(s: TestService, token: string, body: unknown) {
  return s.req('/v1/apps', { method: 'POST', headers: bearer(token), body });
}

for (const store of STORES) {
  t.test(`apps on ${store}`, async (t) => {
    const s = await startService(t, { store, env: { WEBHOOK_ALLOW_PRIVATE: 'on' } });
    const rx = await setupReceiver(t);
    const [alice, bob, carol, dave, erin, frank] = (await Promise.all(['alice', 'bob', 'carol', 'dave', 'erin', 'frank'].map((u) => s.token(u)))) as [string, string, string, string, string, string];
    const parts = webhookParts(s.service.services);
    let appId = '';
    let firstSecret = '';

    await t.test('create shows the secret once; the store keeps only its hash', async (t) => {
      const res = await create(s, alice, integration());
      t.equal(res.status, 200);
      t.match(res.json, {
        id: String,
        name: 'Notes sync',
        capabilities: ['external_integration'],
        external_integration: { triggers_on: 'memory_creation', webhook_url: `${PUBLIC}/hook?k=1`, setup_completed_url: null, auth_url: 'https://notes.example.org/connect' },
        proactive_notification: null,
        private: true,
        is_owner: true,
        installed: false,
        secret: /^svc_app_[0-9A-Za-z]{28}$/,
        secret_prefix: /^svc_app_.{4}\.\.\..{4}$/,
      });
      t.equal(parseKey(res.json.secret), 'app', 'prefix and checksum like developer keys');
      appId = res.json.id;
      firstSecret = res.json.secret;
      const rows = await s.service.services.store.knex('apps').select('*');
      t.equal(rows[0].secret_hash, hashKey(firstSecret));
      t.notOk(JSON.stringify(rows).includes(firstSecret), 'the secret is nowhere in the store');
      const again = await s.req(`/v1/apps/${appId}`, { headers: bearer(alice) });
      t.equal(again.status, 200);
      t.notOk('secret' in again.json, 'never shown again');
      t.equal(again.json.external_integration.auth_url_for_user, 'https://notes.example.org/connect?uid=alice', 'uid appended for the user');
      t.equal(again.json.external_integration.setup_instructions_url_for_user, 'https://notes.example.org/setup?uid=alice');
      t.equal((await parts.apps.findBySecretHash(hashKey(firstSecret)))?.id, appId);
    });

    await t.test("another user's ids answer 404, a private app is invisible to them", async (t) => {
      t.equal((await s.req(`/v1/apps/${appId}`, { headers: bearer(bob) })).status, 404);
      t.same((await s.req('/v1/apps', { headers: bearer(bob) })).json, []);
      const patch = await s.req(`/v1/apps/${appId}`, { method: 'PATCH', headers: bearer(bob), body: { name: 'mine now' } });
      t.equal(patch.status, 404);
      t.equal(patch.json.detail, 'App not found');
      t.equal((await s.req(`/v1/apps/${appId}`, { method: 'DELETE', headers: bearer(bob) })).status, 404);
      t.equal((await s.req(`/v1/apps/${appId}/secret/rotate`, { method: 'POST', headers: bearer(bob) })).status, 404);
      t.equal((await s.req(`/v1/apps/${appId}/webhook-secret`, { headers: bearer(bob) })).status, 404);
      t.equal((await s.req(`/v1/apps/${appId}/webhook-secret/rotate`, { method: 'POST', headers: bearer(bob) })).status, 404);
      t.equal((await s.req(`/v1/apps/${appId}/install`, { method: 'POST', headers: bearer(bob) })).status, 404);
      t.equal((await s.req(`/v1/apps/${appId}`, { headers: bearer(alice) })).json.name, 'Notes sync', 'unchanged');
    });

    await t.test('update: fields merge, a public app shows to others without its private URLs', async (t) => {
      const res = await s.req(`/v1/apps/${appId}`, { method: 'PATCH', headers: bearer(alice), body: { private: false, external_integration: { setup_completed_url: rx.url } } });
      t.equal(res.status, 200);
      t.equal(res.json.private, false);
      t.equal(res.json.external_integration.setup_completed_url, rx.url);
      t.equal(res.json.external_integration.webhook_url, `${PUBLIC}/hook?k=1`, 'fields not named keep their value');
      const seen = await s.req(`/v1/apps/${appId}`, { headers: bearer(bob) });
      t.equal(seen.status, 200);
      t.equal(seen.json.is_owner, false);
      t.notOk('webhook_url' in seen.json.external_integration, 'the webhook URL is the owner\'s');
      t.notOk('setup_completed_url' in seen.json.external_integration);
      t.notOk('secret_prefix' in seen.json);
      t.equal(seen.json.external_integration.auth_url_for_user, 'https://notes.example.org/connect?uid=bob');
      t.equal((await s.req(`/v1/apps/${appId}`, { method: 'PATCH', headers: bearer(alice), body: {} })).status, 422, 'an empty update');
    });

    await t.test('bad apps are refused and change nothing', async (t) => {
      const before = await s.service.services.store.knex('apps').count({ n: '*' });
      const cases: [unknown, number, RegExp | string][] = [
        [integration({ name: '  ' }), 422, 'name'],
        [integration({ external_integration: { triggers_on: 'memory_creation' } }), 422, 'webhook_url'],
        [integration({ external_integration: { triggers_on: 'memory_deleted', webhook_url: `${PUBLIC}/h` } }), 422, 'triggers_on'],
        [integration({ external_integration: { webhook_url: `${PUBLIC}/h` } }), 422, 'triggers_on'],
        [{ name: 'x', capabilities: ['proactive_notification'] }, 422, 'scopes'],
        [{ name: 'x', capabilities: ['proactive_notification'], proactive_notification: { scopes: ['user_secrets'] } }, 422, 'scopes'],
        [{ name: 'x', capabilities: [], external_integration: { triggers_on: 'audio_bytes', webhook_url: `${PUBLIC}/h` } }, 422, 'capabilities'],
        [{ name: 'x', capabilities: ['chat'] }, 422, 'capabilities'],
        [integration({ external_integration: { triggers_on: 'memory_creation', webhook_url: 'http://169.254.169.254/latest' } }), 400, /metadata/],
        [integration({ external_integration: { triggers_on: 'memory_creation', webhook_url: `${PUBLIC}/h`, setup_completed_url: 'http://metadata.google.internal/' } }), 400, /metadata/],
        [integration({ external_integration: { triggers_on: 'memory_creation', webhook_url: `${PUBLIC}/h`, auth_url: 'javascript:alert(1)' } }), 422, 'auth_url'],
      ];
      for (const [body, status, where] of cases) {
        const res = await create(s, alice, body);
        t.equal(res.status, status, JSON.stringify(body).slice(0, 120));
        if (typeof where === 'string') t.ok(JSON.stringify(res.json.detail).includes(where), `names ${where}`);
        else t.match(res.json.detail, where);
      }
      t.same(await s.service.services.store.knex('apps').count({ n: '*' }), before, 'nothing written');
    });

    await t.test('rotating the app secret: the new one is shown once, the old one stops matching', async (t) => {
      const res = await s.req(`/v1/apps/${appId}/secret/rotate`, { method: 'POST', headers: bearer(alice) });
      t.equal(res.status, 200);
      t.match(res.json, { secret: /^svc_app_/, secret_prefix: /^svc_app_/ });
      t.not(res.json.secret, firstSecret);
      t.equal((await parts.apps.findBySecretHash(hashKey(res.json.secret)))?.id, appId, 'the new secret verifies');
      t.equal(await parts.apps.findBySecretHash(hashKey(firstSecret)), undefined, 'the old one does not');
      t.equal((await s.req(`/v1/apps/${appId}`, { headers: bearer(alice) })).json.secret_prefix, res.json.secret_prefix);
      const asKey = await s.req('/v1/dev/user/memories', { headers: bearer(res.json.secret) });
      t.equal(asKey.status, 401, 'an app secret is no developer key');
      t.equal(asKey.headers['x-error-code'], 'ENG_ERR_AUTH_KEY_WRONG_KIND');
    });

    await t.test("the app's webhook secret is its owner's to read and rotate", async (t) => {
      const first = await s.req(`/v1/apps/${appId}/webhook-secret`, { headers: bearer(alice) });
      t.equal(first.status, 200);
      t.match(first.json.secret, /^whsec_/);
      const userSecret = (await s.req('/v1/users/developer/webhook-secret', { headers: bearer(alice) })).json.secret;
      t.not(first.json.secret, userSecret, "an app's secret is not its owner's");
      const rotated = await s.req(`/v1/apps/${appId}/webhook-secret/rotate`, { method: 'POST', headers: bearer(alice) });
      t.same(await parts.secrets.signingSecrets('app', appId, s.clock.now()), [rotated.json.secret, first.json.secret]);
    });

    await t.test('install asks the Setup Completed URL with the uid: true installs, false is 409, failures are 502', async (t) => {
      const ok = await s.req(`/v1/apps/${appId}/install`, { method: 'POST', headers: bearer(bob) });
      t.equal(ok.status, 200);
      t.match(ok.json, { app_id: appId, installed: true, scopes: [], installed_at: String });
      t.equal(rx.asked.at(-1), 'bob', 'asked about this user');

      const notYet = await s.req(`/v1/apps/${appId}/install`, { method: 'POST', headers: bearer(frank) });
      t.equal(notYet.status, 409);
      t.equal(notYet.headers['x-error-code'], 'ENG_ERR_APP_SETUP_INCOMPLETE');
      t.equal(rx.asked.at(-1), 'frank');
      for (const [token, uid, reason] of [
        [carol, 'carol', /HTTP 500/],
        [dave, 'dave', /redirect/],
        [erin, 'erin', /is_setup_completed/],
      ] as const) {
        const res = await s.req(`/v1/apps/${appId}/install`, { method: 'POST', headers: bearer(token) });
        t.equal(res.status, 502, uid);
        t.equal(res.headers['x-error-code'], 'ENG_ERR_APP_SETUP_CHECK_FAILED');
        t.match(res.json.detail, reason);
      }
      t.equal(rx.asked.filter((u) => u === 'dave').length, 1, 'the redirect was not followed');
      for (const token of [frank, carol, dave, erin]) t.same((await s.req('/v1/apps?installed=true', { headers: bearer(token) })).json, [], 'not installed');

      const listed = await s.req('/v1/apps', { headers: bearer(bob) });
      t.same(listed.json.map((a: { id: string; installed: boolean }) => [a.id, a.installed]), [[appId, true]]);
      t.equal((await s.req('/v1/apps?installed=false', { headers: bearer(bob) })).json.length, 0);
      t.equal((await s.req('/v1/apps?installed=true', { headers: bearer(bob) })).json.length, 1);
    });

    await t.test('a Setup Completed URL that does not answer is a 502', async (t) => {
      const dead = http.createServer();
      await new Promise<void>((r) => dead.listen(0, '127.0.0.1', r));
      const port = (dead.address() as AddressInfo).port;
      await new Promise<void>((r) => dead.close(() => r()));
      const app = await create(s, alice, integration({ external_integration: { triggers_on: 'memory_creation', webhook_url: `${PUBLIC}/h`, setup_completed_url: `http://127.0.0.1:${port}/setup` } }));
      const res = await s.req(`/v1/apps/${app.json.id}/install`, { method: 'POST', headers: bearer(alice) });
      t.equal(res.status, 502);
      t.match(res.json.detail, /connection failed/);
      t.equal((await s.req(`/v1/apps/${app.json.id}`, { method: 'DELETE', headers: bearer(alice) })).status, 204);
    });

    await t.test('proactive scopes are granted by installing; every endpoint for a user and trigger', async (t) => {
      s.clock.advance(1000);
      const proactive = await create(s, carol, {
        name: 'Coach',
        capabilities: ['external_integration', 'proactive_notification'],
        external_integration: { triggers_on: 'transcript_processed', webhook_url: `${PUBLIC}/coach` },
        proactive_notification: { scopes: ['user_facts', 'user_name', 'user_name'] },
        private: false,
      });
      t.equal(proactive.status, 200);
      t.same(proactive.json.proactive_notification, { scopes: ['user_name', 'user_facts'] });
      const audio = await create(s, carol, integration({ name: 'Recorder', external_integration: { triggers_on: 'audio_bytes', webhook_url: `${PUBLIC}/audio` }, private: false }));
      for (const id of [proactive.json.id, audio.json.id]) t.equal((await s.req(`/v1/apps/${id}/install`, { method: 'POST', headers: bearer(bob) })).status, 200);
      t.same((await parts.apps.installation(proactive.json.id, 'bob'))?.scopes, ['user_name', 'user_facts'], 'granted at install');

      await s.req('/v1/users/developer/webhook/memory_created', { method: 'POST', headers: bearer(bob), body: { url: `${PUBLIC}/bob-own` } });
      await s.req('/v1/users/developer/webhook/audio_bytes', { method: 'POST', headers: bearer(bob), body: { url: `${PUBLIC}/bob-audio,12` } });
      t.same(await parts.webhooks.endpointsFor('bob', 'memory_created'), [
        { ownerKind: 'user', ownerId: 'bob', url: `${PUBLIC}/bob-own`, seconds: null },
        { ownerKind: 'app', ownerId: appId, url: `${PUBLIC}/hook?k=1`, seconds: null },
      ]);
      t.same(await parts.webhooks.endpointsFor('bob', 'realtime_transcript'), [{ ownerKind: 'app', ownerId: proactive.json.id, url: `${PUBLIC}/coach`, seconds: null }]);
      t.same(await parts.webhooks.endpointsFor('bob', 'audio_bytes'), [
        { ownerKind: 'user', ownerId: 'bob', url: `${PUBLIC}/bob-audio`, seconds: 12 },
        { ownerKind: 'app', ownerId: audio.json.id, url: `${PUBLIC}/audio`, seconds: 5 },
      ]);
      t.same(await parts.webhooks.endpointsFor('bob', 'day_summary'), [], 'apps get no day summary');
      for (const type of ['memory_created', 'audio_bytes', 'realtime_transcript', 'day_summary'] as const) {
        const many = await parts.webhooks.endpointsForUsers(['bob', 'alice', 'nobody', 'bob'], type);
        for (const uid of ['bob', 'alice', 'nobody']) t.same(many.get(uid), await parts.webhooks.endpointsFor(uid, type), `${type} of ${uid} read with others as on its own`);
      }
      t.ok(await parts.apps.setWebhookEnabled(audio.json.id, false, s.clock.now()));
      t.same((await parts.webhooks.endpointsFor('bob', 'audio_bytes')).map((e) => e.ownerKind), ['user'], "a disabled app webhook is no endpoint");
      t.equal((await s.req(`/v1/apps/${audio.json.id}`, { headers: bearer(carol) })).json.webhook_enabled, false, 'its owner sees it disabled');
      t.ok(await parts.apps.setWebhookEnabled(audio.json.id, true, s.clock.now()));
      t.same(await parts.webhooks.endpointsFor('alice', 'memory_created'), [], 'only what this user set or installed');

      // A capability taken away takes its trigger along; uninstalling stops an app's deliveries; deleting an app
      // removes every install of it.
      const dropped = await s.req(`/v1/apps/${proactive.json.id}`, { method: 'PATCH', headers: bearer(carol), body: { capabilities: ['proactive_notification'] } });
      t.equal(dropped.status, 200);
      t.equal(dropped.json.external_integration, null);
      t.same(await parts.webhooks.endpointsFor('bob', 'realtime_transcript'), [], 'no trigger without the capability');
      t.equal((await s.req(`/v1/apps/${appId}/install`, { method: 'DELETE', headers: bearer(bob) })).status, 204);
      t.equal((await s.req(`/v1/apps/${appId}/install`, { method: 'DELETE', headers: bearer(bob) })).status, 404, 'not installed any more');
      t.same((await parts.webhooks.endpointsFor('bob', 'memory_created')).map((e) => e.ownerKind), ['user']);
      t.equal((await s.req(`/v1/apps/${audio.json.id}`, { method: 'DELETE', headers: bearer(carol) })).status, 204);
      t.same((await parts.webhooks.endpointsFor('bob', 'audio_bytes')).map((e) => e.ownerKind), ['user']);
      t.equal((await s.req(`/v1/apps/${audio.json.id}`, { headers: bearer(carol) })).status, 404);
      t.equal(await parts.apps.installation(audio.json.id, 'bob'), undefined);
    });

    await t.test('list: public and own apps, newest first, installed flags', async (t) => {
      const mine = await s.req('/v1/apps', { headers: bearer(carol) });
      t.same(mine.json.map((a: { name: string }) => a.name), ['Coach', 'Notes sync']);
      t.same(mine.json.map((a: { is_owner: boolean }) => a.is_owner), [true, false]);
      const bobs = await s.req('/v1/apps?installed=true', { headers: bearer(bob) });
      t.same(bobs.json.map((a: { name: string }) => a.name), ['Coach']);
      t.equal((await s.req('/v1/apps?installed=maybe', { headers: bearer(bob) })).status, 422);

      // An installed app its developer made private stays listed for its user, who can still uninstall it.
      const coach = bobs.json[0].id as string;
      t.equal((await s.req(`/v1/apps/${coach}`, { method: 'PATCH', headers: bearer(carol), body: { private: true } })).status, 200);
      t.same((await s.req('/v1/apps', { headers: bearer(bob) })).json.map((a: { name: string; installed: boolean }) => [a.name, a.installed]), [['Coach', true], ['Notes sync', false]]);
      t.equal((await s.req(`/v1/apps/${coach}`, { headers: bearer(bob) })).status, 200);
      t.equal((await s.req(`/v1/apps/${coach}/install`, { method: 'POST', headers: bearer(bob) })).status, 404, 'but cannot install it again');
      t.equal((await s.req(`/v1/apps/${coach}/install`, { method: 'DELETE', headers: bearer(bob) })).status, 204);
      t.same((await s.req('/v1/apps', { headers: bearer(bob) })).json.map((a: { name: string }) => a.name), ['Notes sync'], 'then it is gone from their list');
    });
  });
}
