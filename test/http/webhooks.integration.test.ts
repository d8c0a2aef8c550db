// Developer webhook settings and the user's webhook secret over real sockets, on sqlite and PostgreSQL: each type's
// URL saved, read, enabled and disabled; `url,seconds` for audio; refused destinations; the secret and its rotation.
import t from 'tap';
import { startService, type TestService } from '../helpers/service.js';
import { bearer } from '../helpers/http.js';
import { STORES } from '../helpers/stores.js';
import { webhookParts } from '../../engine/webhooks/parts.js';

const TYPES = ['memory_created', 'realtime_transcript', 'audio_bytes', 'day_summary'];
/** A public address written as an IP literal: saving it needs no DNS, and nothing is ever sent to it. */
const PUBLIC = 'https://93.184.215.14';

async function save(s: TestService, token: string, type: string, url: string) {
  return s.req(`/v1/users/developer/webhook/${type}`, { method: 'POST', headers: bearer(token), body: { url } });
}

for (const store of STORES) {
  t.test(`developer webhooks on ${store}`, async (t) => {
    const s = await startService(t, { store });
    const alice = await s.token('alice');
    const bob = await s.token('bob');

    await t.test('each type: unset, saved, read back, listed in the status', async (t) => {
      for (const type of TYPES) {
        const before = await s.req(`/v1/users/developer/webhook/${type}`, { headers: bearer(alice) });
        t.equal(before.status, 200);
        t.same(before.json, { url: null, enabled: false }, `${type}: nothing set`);
      }
      t.same((await s.req('/v1/users/developer/webhooks/status', { headers: bearer(alice) })).json, { memory_created: false, realtime_transcript: false, audio_bytes: false, day_summary: false });
      for (const type of ['memory_created', 'realtime_transcript', 'day_summary']) {
        const res = await save(s, alice, type, `${PUBLIC}/${type}?token=abc`);
        t.equal(res.status, 200, `${type} saved`);
        t.same(res.json, { status: 'ok' });
        t.same((await s.req(`/v1/users/developer/webhook/${type}`, { headers: bearer(alice) })).json, { url: `${PUBLIC}/${type}?token=abc`, enabled: true });
      }
      t.same((await s.req('/v1/users/developer/webhooks/status', { headers: bearer(alice) })).json, { memory_created: true, realtime_transcript: true, audio_bytes: false, day_summary: true });
      t.same((await s.req('/v1/users/developer/webhooks/status', { headers: bearer(bob) })).json, { memory_created: false, realtime_transcript: false, audio_bytes: false, day_summary: false }, 'per user');
    });

    await t.test('audio_bytes takes url,seconds: default 5, bounds 1 to 60', async (t) => {
      const read = async () => (await s.req('/v1/users/developer/webhook/audio_bytes', { headers: bearer(alice) })).json;
      t.equal((await save(s, alice, 'audio_bytes', `${PUBLIC}/audio`)).status, 200);
      t.same(await read(), { url: `${PUBLIC}/audio,5`, enabled: true, seconds: 5 }, 'no seconds: 5');
      t.equal((await save(s, alice, 'audio_bytes', `${PUBLIC}/audio,10`)).status, 200);
      t.same(await read(), { url: `${PUBLIC}/audio,10`, enabled: true, seconds: 10 });
      for (const ok of ['1', '60', ' 7']) t.equal((await save(s, alice, 'audio_bytes', `${PUBLIC}/audio,${ok}`)).status, 200, `seconds ${ok} accepted`);
      t.equal((await read()).seconds, 7);
      for (const bad of ['0', '61', 'abc', '2.5', '-1']) {
        const res = await save(s, alice, 'audio_bytes', `${PUBLIC}/audio,${bad}`);
        t.equal(res.status, 422, `seconds ${bad} refused`);
        t.match(res.json.detail[0], { loc: ['body', 'url'], type: 'value_error', msg: /1 to 60/ });
      }
      t.equal((await read()).seconds, 7, 'a refused save changes nothing');
      const endpoints = await webhookParts(s.service.services).webhooks.endpointsFor('alice', 'audio_bytes');
      t.same(endpoints, [{ ownerKind: 'user', ownerId: 'alice', url: `${PUBLIC}/audio`, seconds: 7 }], 'the delivery query gets the URL without the seconds');
    });

    await t.test('disable and enable; enabling an unset type is a conflict; an empty URL clears', async (t) => {
      const off = await s.req('/v1/users/developer/webhook/memory_created/disable', { method: 'POST', headers: bearer(alice) });
      t.equal(off.status, 200);
      t.same(off.json, { status: 'ok' });
      t.same((await s.req('/v1/users/developer/webhook/memory_created', { headers: bearer(alice) })).json, { url: `${PUBLIC}/memory_created?token=abc`, enabled: false }, 'disabled keeps the URL');
      t.equal((await s.req('/v1/users/developer/webhooks/status', { headers: bearer(alice) })).json.memory_created, false);
      t.same(await webhookParts(s.service.services).webhooks.endpointsFor('alice', 'memory_created'), [], 'a disabled webhook is no endpoint');
      t.equal((await s.req('/v1/users/developer/webhook/memory_created/enable', { method: 'POST', headers: bearer(alice) })).status, 200);
      t.equal((await s.req('/v1/users/developer/webhooks/status', { headers: bearer(alice) })).json.memory_created, true);
      t.equal((await webhookParts(s.service.services).webhooks.endpointsFor('alice', 'memory_created')).length, 1);

      const unset = await s.req('/v1/users/developer/webhook/memory_created/enable', { method: 'POST', headers: bearer(bob) });
      t.equal(unset.status, 409);
      t.equal(unset.headers['x-error-code'], 'ENG_ERR_WEBHOOK_NOT_SET');
      t.match(unset.json.detail, /memory_created/);

      t.equal((await save(s, alice, 'day_summary', '')).status, 200);
      t.same((await s.req('/v1/users/developer/webhook/day_summary', { headers: bearer(alice) })).json, { url: null, enabled: false }, 'cleared');
    });

    await t.test('an unknown type is a 422 naming the four', async (t) => {
      for (const [method, path] of [
        ['GET', '/v1/users/developer/webhook/audio_bytes_websocket'],
        ['POST', '/v1/users/developer/webhook/memories'],
        ['POST', '/v1/users/developer/webhook/memories/enable'],
      ] as const) {
        const res = await s.req(path, { method, headers: bearer(alice), ...(method === 'POST' && !path.endsWith('enable') ? { body: { url: `${PUBLIC}/x` } } : {}) });
        t.equal(res.status, 422, `${method} ${path}`);
        t.match(res.json.detail[0], { loc: ['path', 'type'], type: 'enum', msg: "Input should be 'memory_created', 'realtime_transcript', 'audio_bytes' or 'day_summary'" });
      }
    });

    await t.test('refused destinations: a clear 400 naming the rule, never echoing the URL, nothing saved', async (t) => {
      const refused: [string, RegExp][] = [
        ['http://127.0.0.1:9/hook?token=tok-secret', /loopback/],
        ['http://10.0.0.1/hook?token=tok-secret', /private/],
        ['http://172.20.1.1/hook', /private/],
        ['http://192.168.1.1/hook', /private/],
        ['http://169.254.169.254/latest/meta-data/', /metadata/],
        ['http://metadata.google.internal/computeMetadata/v1/', /metadata/],
        ['http://[::1]:9/hook', /loopback/],
        ['http://[::ffff:10.0.0.1]/hook', /private/],
        ['http://100.64.1.1/hook', /carrier-grade NAT/],
        ['http://localhost:9/hook?token=tok-secret', /loopback/],
        ['ftp://93.184.215.14/hook', /only http and https/],
        ['https://user:pw-secret@93.184.215.14/hook', /user name or password/],
      ];
      for (const [url, rule] of refused) {
        const res = await save(s, bob, 'realtime_transcript', url);
        t.equal(res.status, 400, url);
        t.equal(res.headers['x-error-code'], 'ENG_ERR_WEBHOOK_DESTINATION_REFUSED');
        t.match(res.json.detail, rule);
        t.notMatch(res.json.detail, /tok-secret|pw-secret|127\.0\.0\.1|localhost/, 'the URL is not echoed');
      }
      const notUrl = await save(s, bob, 'realtime_transcript', 'not a url');
      t.equal(notUrl.status, 422);
      t.match(notUrl.json.detail[0], { loc: ['body', 'url'], type: 'value_error' });
      t.same((await s.req('/v1/users/developer/webhook/realtime_transcript', { headers: bearer(bob) })).json, { url: null, enabled: false }, 'nothing saved');
    });

    await t.test('the webhook secret: whsec_, stable, rotated with a 24 h overlap', async (t) => {
      const first = await s.req('/v1/users/developer/webhook-secret', { headers: bearer(alice) });
      t.equal(first.status, 200);
      t.match(first.json, { secret: /^whsec_[A-Za-z0-9+/]+={0,2}$/, previous_secret_expires_at: null, rotated_at: null });
      t.equal(Buffer.from(first.json.secret.slice(6), 'base64').length, 32, '32 random bytes');
      t.same((await s.req('/v1/users/developer/webhook-secret', { headers: bearer(alice) })).json, first.json, 'the same on every read');
      const other = await s.req('/v1/users/developer/webhook-secret', { headers: bearer(bob) });
      t.not(other.json.secret, first.json.secret, 'one per user');

      const secrets = webhookParts(s.service.services).secrets;
      t.same(await secrets.signingSecrets('user', 'alice', s.clock.now()), [first.json.secret]);
      const rotated = await s.req('/v1/users/developer/webhook-secret/rotate', { method: 'POST', headers: bearer(alice) });
      t.equal(rotated.status, 200);
      t.not(rotated.json.secret, first.json.secret);
      t.equal(rotated.json.previous_secret_expires_at, new Date(s.clock.now() + 24 * 3600 * 1000).toISOString());
      t.same((await s.req('/v1/users/developer/webhook-secret', { headers: bearer(alice) })).json.secret, rotated.json.secret);
      t.same(await secrets.signingSecrets('user', 'alice', s.clock.now()), [rotated.json.secret, first.json.secret], 'both sign during the overlap, newest first');
      t.same(await secrets.signingSecrets('user', 'alice', s.clock.now() + 24 * 3600 * 1000 - 1), [rotated.json.secret, first.json.secret]);
      s.clock.advance(24 * 3600 * 1000);
      t.same(await secrets.signingSecrets('user', 'alice', s.clock.now()), [rotated.json.secret], 'then only the new one');
      const later = await s.token('alice');
      t.equal((await s.req('/v1/users/developer/webhook-secret', { headers: bearer(later) })).json.previous_secret_expires_at, null);
    });

    await t.test('every route needs a signed-in user, not a developer key', async (t) => {
      const key = await s.devKey('carol');
      t.equal((await s.req('/v1/users/developer/webhooks/status')).status, 401);
      t.equal((await s.req('/v1/users/developer/webhooks/status', { headers: bearer(key) })).status, 401);
      t.equal((await s.req('/v1/users/developer/webhook-secret', { headers: bearer(key) })).status, 401);
    });
  });
}

t.test('WEBHOOK_ALLOW_PRIVATE=on accepts loopback and private receivers, never metadata', async (t) => {
  const s = await startService(t, { env: { WEBHOOK_ALLOW_PRIVATE: 'on' } });
  const alice = await s.token('alice');
  for (const url of ['http://127.0.0.1:9/hook', 'http://localhost:9/hook', 'http://10.0.0.1/hook', 'http://[::1]:9/hook']) {
    t.equal((await save(s, alice, 'memory_created', url)).status, 200, `${url} accepted`);
  }
  for (const url of ['http://169.254.169.254/latest/meta-data/', 'http://[::ffff:169.254.169.254]/', 'http://metadata.google.internal/', 'http://[fd00:ec2::254]/']) {
    const res = await save(s, alice, 'memory_created', url);
    t.equal(res.status, 400, `${url} refused`);
    t.match(res.json.detail, /metadata/);
  }
});
