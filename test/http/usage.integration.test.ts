// GET /v1/users/usage over real HTTP on sqlite and PostgreSQL: the signed-in user's rows only, ranges, 401 for keys, 422, metrics.
import t from 'tap';
import { ManualClock } from '../../engine/clock.js';
import { startService } from '../helpers/service.js';
import { bearer } from '../helpers/http.js';
import { STORES } from '../helpers/stores.js';

const NOW = Date.UTC(2026, 10, 24, 12);
const at = (day: string, time = '12:00:00.000'): number => Date.parse(`${day}T${time}Z`);

for (const store of STORES) {
  t.test(`usage on ${store}`, async (t) => {
    const s = await startService(t, { store, clock: new ManualClock(NOW) });
    const recorder = s.service.services.usageRecorder;
    recorder.record({ uid: 'alice', provider: 'local', audioSeconds: 10, words: 20, at: at('2026-11-24') });
    recorder.record({ uid: 'alice', provider: 'custom', audioSeconds: 5, words: 10, at: at('2026-11-24', '00:00:00.000') });
    recorder.record({ uid: 'alice', provider: 'local', audioSeconds: 1.1, words: 2, at: at('2026-11-23', '23:59:59.999') });
    recorder.record({ uid: 'alice', provider: 'provider_a', audioSeconds: 100, words: 150, at: at('2026-10-01') });
    recorder.record({ uid: 'bob', provider: 'local', audioSeconds: 99, words: 99, at: at('2026-11-24') });
    await recorder.flush();
    const alice = bearer(await s.token('alice'));
    const get = (query: string, headers = alice) => s.req(`/v1/users/usage${query}`, { headers });

    await t.test('the last 30 days by default, by date then provider, with totals', async (t) => {
      const res = await get('');
      t.equal(res.status, 200);
      t.same(res.json, {
        days: [
          { date: '2026-11-23', provider: 'local', audio_seconds: 1.1, words: 2 },
          { date: '2026-11-24', provider: 'custom', audio_seconds: 5, words: 10 },
          { date: '2026-11-24', provider: 'local', audio_seconds: 10, words: 20 },
        ],
        total: { audio_seconds: 16.1, words: 32 },
      });
      const bob = await get('', bearer(await s.token('bob')));
      t.same(bob.json.days, [{ date: '2026-11-24', provider: 'local', audio_seconds: 99, words: 99 }], "another user sees only their own");
      t.same((await get('', bearer(await s.token('carol')))).json, { days: [], total: { audio_seconds: 0, words: 0 } }, 'no usage yet');
    });

    await t.test('explicit ranges, both ends included', async (t) => {
      t.same((await get('?start_date=2026-10-01&end_date=2026-11-23')).json.days.map((d: { date: string }) => d.date), ['2026-10-01', '2026-11-23']);
      t.same((await get('?start_date=2026-10-01')).json.days.map((d: { provider: string }) => d.provider), ['provider_a'], 'start only: 30 days from it');
      t.same((await get('?end_date=2026-11-23')).json.total, { audio_seconds: 1.1, words: 2 }, 'end only: the 30 days up to it');
      t.equal((await get('?start_date=2025-11-24&end_date=2026-11-24')).status, 200, '366 days is the most');
    });

    await t.test('bad dates answer 422 in the validation shape', async (t) => {
      const invalid = await get('?start_date=2026-02-30');
      t.equal(invalid.status, 422);
      t.match(invalid.json.detail[0], { loc: ['query', 'start_date'], type: 'date_parsing' });
      t.match((await get('?end_date=24-11-2026')).json.detail[0], { loc: ['query', 'end_date'] });
      const reversed = await get('?start_date=2026-11-24&end_date=2026-11-23');
      t.equal(reversed.status, 422);
      t.match(reversed.json.detail[0], { loc: ['query', 'end_date'], type: 'value_error' });
      const tooLong = await get('?start_date=2025-11-23&end_date=2026-11-24');
      t.equal(tooLong.status, 422);
      t.match(tooLong.json.detail[0], { loc: ['query', 'end_date'], type: 'value_error' }, 'one day past the longest range');
    });

    await t.test('only the signed-in ID token: developer keys and no credentials answer 401', async (t) => {
      const key = await s.devKey('alice', ['conversations:read']);
      t.equal((await get('', bearer(key))).status, 401, 'a developer key');
      t.equal((await get('', {})).status, 401, 'no Authorization header');
      t.equal((await get('', bearer('not-a-token'))).status, 401, 'a bad token');
    });

    await t.test('documented, and counted in /metrics', async (t) => {
      const op = (await s.req('/v1/dev/openapi.json')).json.paths['/v1/users/usage'].get;
      t.same(op.security, [{ IdToken: [] }]);
      t.same(op.parameters.map((p: { name: string }) => p.name), ['start_date', 'end_date']);
      const metrics = (await s.req('/metrics')).text;
      t.match(metrics, /# TYPE stt_audio_seconds_total counter/);
      t.match(metrics, /stt_audio_seconds_total\{provider="local"\} 110\.1/);
      t.match(metrics, /stt_words_total\{provider="custom"\} 10/);
    });
  });
}
