// User settings and push tokens over real sockets, on sqlite and PostgreSQL: defaults, validation of each field (IANA
// time zones, BCP 47 tags, local hours), one token per device and several per user, a device moving accounts, removal.
import t from 'tap';
import { startService } from '../helpers/service.js';
import { bearer } from '../helpers/http.js';
import { STORES } from '../helpers/stores.js';

for (const store of STORES) {
  t.test(`settings and push tokens on ${store}`, async (t) => {
    const s = await startService(t, { store });
    const alice = bearer(await s.token('alice'));
    const bob = bearer(await s.token('bob'));
    const settings = s.service.services.userSettings;

    const defaults = await s.req('/v1/users/settings', { headers: alice });
    t.equal(defaults.status, 200);
    t.same(defaults.json, { name: null, time_zone: null, language: null, daily_summary_enabled: true, daily_summary_hour: 22 }, 'defaults before any save');

    for (const [body, field] of [
      [{ time_zone: 'Mars/Olympus_Mons' }, 'time_zone'],
      [{ time_zone: '+05:00' }, 'time_zone'],
      [{ daily_summary_hour: 24 }, 'daily_summary_hour'],
      [{ daily_summary_hour: -1 }, 'daily_summary_hour'],
      [{ language: 'not a language tag!' }, 'language'],
    ] as const) {
      const res = await s.req('/v1/users/settings', { method: 'PATCH', headers: alice, body });
      t.equal(res.status, 422, `${JSON.stringify(body)} is refused`);
      t.same(res.json.detail[0].loc, ['body', field], 'naming the field');
    }
    t.equal((await s.req('/v1/users/settings', { method: 'PATCH', headers: alice, body: {} })).status, 422, 'an empty change is refused');

    const saved = await s.req('/v1/users/settings', { method: 'PATCH', headers: alice, body: { name: ' Alice ', time_zone: 'america/new_york', language: 'pt-br', daily_summary_hour: 7 } });
    t.equal(saved.status, 200);
    t.same(saved.json, { name: 'Alice', time_zone: 'America/New_York', language: 'pt-BR', daily_summary_enabled: true, daily_summary_hour: 7 }, 'saved in canonical form');
    const off = await s.req('/v1/users/settings', { method: 'PATCH', headers: alice, body: { daily_summary_enabled: false, name: null } });
    t.same(off.json, { name: null, time_zone: 'America/New_York', language: 'pt-BR', daily_summary_enabled: false, daily_summary_hour: 7 }, 'other fields kept');
    t.same((await s.req('/v1/users/settings', { headers: bob })).json.daily_summary_hour, 22, "another user's settings are their own");

    const tokenA = 'dA1b2C3d4E5f6G7h8I9j:APA91bHPhone';
    const tokenB = 'eZ9y8X7w6V5u4T3s2R1q:APA91bHWatch';
    t.equal((await s.req('/v1/users/fcm-token', { method: 'POST', headers: alice, body: { fcm_token: tokenA } })).status, 200);
    const second = await s.req('/v1/users/fcm-token', { method: 'POST', headers: alice, body: { fcm_token: tokenB, time_zone: 'Pacific/Kiritimati' } });
    t.same(second.json, { status: 'Ok' });
    await s.req('/v1/users/fcm-token', { method: 'POST', headers: alice, body: { fcm_token: tokenA } });
    t.same((await settings.tokens('alice')).map((x) => x.token).sort(), [tokenA, tokenB].sort(), 'one token per device, registering again keeps one');
    t.equal((await s.req('/v1/users/settings', { headers: alice })).json.time_zone, 'Pacific/Kiritimati', "a token's time zone is saved to the settings");
    t.equal((await s.req('/v1/users/fcm-token', { method: 'POST', headers: alice, body: { fcm_token: tokenA, time_zone: 'Nowhere/Land' } })).status, 422, 'a bad time zone with a token is refused');
    t.equal((await s.req('/v1/users/fcm-token', { method: 'POST', headers: alice, body: { fcm_token: '' } })).status, 422, 'an empty token is refused');

    await s.req('/v1/users/fcm-token', { method: 'POST', headers: bob, body: { fcm_token: tokenB } });
    t.same((await settings.tokens('alice')).map((x) => x.token), [tokenA], 'a device signed in to another account follows it');
    t.equal((await s.req('/v1/users/fcm-token', { method: 'DELETE', headers: alice, body: { fcm_token: tokenB } })).status, 404, "another user's token is not yours to remove");
    t.equal((await s.req('/v1/users/fcm-token', { method: 'DELETE', headers: alice, body: { fcm_token: tokenA } })).status, 204);
    t.same(await settings.tokens('alice'), [], 'removed');
    t.equal((await s.req('/v1/users/settings', { headers: {} })).status, 401, 'the ID token is required');
  });
}
