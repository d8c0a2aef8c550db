// Developer conversation routes over real sockets on sqlite and PostgreSQL: shapes, store changes, every error, pagination and filters.
import t from 'tap';
import { startService, type TestService } from '../helpers/service.js';
import { bearer } from '../helpers/http.js';
import { STORES } from '../helpers/stores.js';
import { MAX_CONVERSATIONS_PAGE } from '../../http/routes/conversations.js';

const BASE = '/v1/dev/user/conversations';
const TASK_TEXT = 'Remind me to call the dentist tomorrow at 3pm. We have a team meeting on Friday at 10 for an hour to review the product launch.';

async function rows(s: TestService, table: string): Promise<Record<string, any>[]> {
  return s.service.services.store.knex(table).select('*');
}

for (const store of STORES) {
  t.test(`conversations on ${store}`, async (t) => {
    const s = await startService(t, { store });
    const rw = bearer(await s.devKey('alice', ['conversations:read', 'conversations:write']));
    const readOnly = bearer(await s.devKey('alice', ['conversations:read']));
    const writeOnly = bearer(await s.devKey('alice', ['conversations:write']));
    const bob = bearer(await s.devKey('bob', ['conversations:read', 'conversations:write']));
    const post = (body: unknown, h = rw, path = BASE) => s.req(path, { method: 'POST', headers: h, body });

    let textId = '';
    await t.test('create from text runs the processor and stores the result', async (t) => {
      const res = await post({ text: TASK_TEXT, text_source: 'message', started_at: '2026-11-23T12:00:00Z', geolocation: { latitude: 52.5, longitude: 13.4, address: 'Berlin' } });
      t.equal(res.status, 200);
      t.match(res.json, { id: String, status: 'completed', discarded: false });
      t.same(Object.keys(res.json).sort(), ['discarded', 'id', 'status']);
      textId = res.json.id;
      const row = (await rows(s, 'conversations')).find((r) => r.id === textId)!;
      t.equal(row.user_id, 'alice');
      t.equal(row.status, 'completed');
      t.equal(row.text_source, 'message');
      t.equal(row.started_at, '2026-11-23T12:00:00.000Z');
      t.equal(row.finished_at, '2026-11-23T12:05:00.000Z', 'finished_at defaults to started_at + 300 s');
      t.equal(row.produced_by, 'builtin');
      const segs = (await rows(s, 'conversation_segments')).filter((r) => r.conversation_id === textId);
      t.equal(segs.length, 1, 'the text is kept as one segment');

      const one = await s.req(`${BASE}/${textId}`, { headers: readOnly });
      t.equal(one.status, 200);
      const c = one.json;
      t.same(Object.keys(c).sort(), ['created_at', 'finished_at', 'folder_id', 'folder_name', 'geolocation', 'id', 'language', 'source', 'started_at', 'structured', 'transcript_segments']);
      t.match(c, { id: textId, started_at: '2026-11-23T12:00:00.000Z', language: 'en', source: 'external_integration', folder_id: null, folder_name: null, transcript_segments: null });
      t.same(c.geolocation, { latitude: 52.5, longitude: 13.4, address: 'Berlin' });
      t.match(c.structured, { title: String, overview: String, emoji: String, category: 'work' });
      t.ok(c.structured.title.length > 0);
      t.match(c.structured.action_items[0], { description: /call the dentist/i, completed: false, completed_at: null, conversation_id: textId, due_at: '2026-11-24T15:00:00.000Z' });
      t.match(c.structured.events[0], { title: /Team Meeting/, start: '2026-11-27T10:00:00.000Z', duration: 60, created: false, description: String });
    });

    await t.test('external text is never discarded; defaults apply', async (t) => {
      const res = await post({ text: 'hi' });
      t.equal(res.status, 200);
      t.equal(res.json.discarded, false);
      const row = (await rows(s, 'conversations')).find((r) => r.id === res.json.id)!;
      t.equal(row.text_source, 'other_text');
      t.equal(row.language, 'en');
      t.equal(row.started_at, new Date(s.clock.now()).toISOString(), 'started_at defaults to now');
    });

    await t.test('get with include_transcript, and with the ID token', async (t) => {
      const withT = await s.req(`${BASE}/${textId}?include_transcript=true`, { headers: rw });
      t.equal(withT.status, 200);
      t.same(withT.json.transcript_segments, [{ text: TASK_TEXT, start: 0, end: 300, id: withT.json.transcript_segments[0].id, speaker_id: 0, speaker_name: 'Speaker 0' }]);
      const token = await s.token('alice');
      const viaToken = await s.req(`${BASE}/${textId}`, { headers: bearer(token) });
      t.equal(viaToken.status, 200, 'the signed-in ID token reads one conversation');
      t.equal(viaToken.json.id, textId);
      const listViaToken = await s.req(BASE, { headers: bearer(token) });
      t.equal(listViaToken.status, 401, 'but not the list');
    });

    let segId = '';
    await t.test('create from segments', async (t) => {
      const res = await post(
        {
          transcript_segments: [
            { text: 'I work at Acme as a software engineer.', speaker: 'SPEAKER_01', is_user: true, start: 0, end: 3.5 },
            { text: "Let's book the flight to Lisbon next Monday.", speaker: 'SPEAKER_02', start: 3.5, end: 7.25 },
          ],
          started_at: '2026-11-20T08:00:00Z',
          language: 'pt',
        },
        rw,
        `${BASE}/from-segments`,
      );
      t.equal(res.status, 200);
      t.match(res.json, { status: 'completed', discarded: false });
      segId = res.json.id;
      const c = (await s.req(`${BASE}/${segId}?include_transcript=1`, { headers: rw })).json;
      t.equal(c.finished_at, '2026-11-20T08:00:07.250Z', 'finished_at defaults to started_at + the last end');
      t.equal(c.source, 'external_integration');
      t.equal(c.language, 'pt');
      t.match(c.transcript_segments, [
        { text: 'I work at Acme as a software engineer.', start: 0, end: 3.5, speaker_id: 1, speaker_name: 'User' },
        { start: 3.5, end: 7.25, speaker_id: 2, speaker_name: 'Speaker 2' },
      ]);
      t.ok(c.transcript_segments.every((x: { id: string }) => typeof x.id === 'string' && x.id.length > 0));
    });

    await t.test('small talk from segments is discarded and left out of the list', async (t) => {
      const res = await post({ transcript_segments: [{ text: 'Hi, how are you?', start: 0, end: 1 }, { text: 'Good, thanks.', start: 1, end: 2 }], source: 'phone' }, rw, `${BASE}/from-segments`);
      t.equal(res.status, 200);
      t.match(res.json, { status: 'completed', discarded: true });
      const one = await s.req(`${BASE}/${res.json.id}`, { headers: rw });
      t.equal(one.status, 200, 'a discarded conversation can still be read');
      t.match(one.json.structured, { title: '', overview: '', emoji: '🧠', action_items: [], events: [] });
      t.equal(one.json.source, 'phone');
      const list = await s.req(`${BASE}?limit=100`, { headers: rw });
      t.notOk(list.json.some((c: { id: string }) => c.id === res.json.id));
    });

    await t.test('segment rules answer 422 per segment and store nothing', async (t) => {
      const before = (await rows(s, 'conversations')).length;
      const res = await post(
        {
          transcript_segments: [
            { text: 'fine', start: 0, end: 1 },
            { text: 'backwards', start: 5, end: 4 },
            { text: 'negative', start: -1, end: 2 },
            { text: '   ', start: 3, end: 4 },
            { text: 'zero length', start: 4, end: 4 },
          ],
        },
        rw,
        `${BASE}/from-segments`,
      );
      t.equal(res.status, 422);
      t.same(
        res.json.detail.map((d: { msg: string }) => d.msg),
        ['Value error, Segment 1: end time must be after start time', 'Value error, Segment 2: start time cannot be negative', 'Value error, Segment 3: text cannot be empty', 'Value error, Segment 4: end time must be after start time'],
      );
      t.same(res.json.detail[0].loc, ['body', 'transcript_segments', 1]);
      const empty = await post({ transcript_segments: [] }, rw, `${BASE}/from-segments`);
      t.equal(empty.status, 422);
      t.equal(empty.json.detail[0].type, 'too_short');
      const tooMany = await post({ transcript_segments: Array.from({ length: 501 }, (_, i) => ({ text: 'x', start: i, end: i + 1 })) }, rw, `${BASE}/from-segments`);
      t.equal(tooMany.status, 422);
      t.equal(tooMany.json.detail[0].type, 'too_long');
      const backwards = await post({ transcript_segments: [{ text: 'x', start: 0, end: 1 }], started_at: '2026-11-20T08:00:00Z', finished_at: '2026-11-20T08:00:00Z' }, rw, `${BASE}/from-segments`);
      t.equal(backwards.status, 422, 'finished_at must be after started_at');
      t.equal((await rows(s, 'conversations')).length, before);
    });

    await t.test('text bounds answer 422', async (t) => {
      const before = (await rows(s, 'conversations')).length;
      const cases: Array<[unknown, string, (string | number)[]]> = [
        [{ text: '' }, 'string_too_short', ['body', 'text']],
        [{ text: 'x'.repeat(100_001) }, 'string_too_long', ['body', 'text']],
        [{}, 'missing', ['body', 'text']],
        [{ text: 'x', text_source: 'email' }, 'enum', ['body', 'text_source']],
        [{ text: 'x', started_at: 'yesterday' }, 'datetime_parsing', ['body', 'started_at']],
        [{ text: 'x', geolocation: { latitude: 91, longitude: 0 } }, 'less_than_equal', ['body', 'geolocation', 'latitude']],
        [{ text: 'x', geolocation: { latitude: 0, longitude: -181 } }, 'greater_than_equal', ['body', 'geolocation', 'longitude']],
        [{ text: 'x', started_at: '2026-11-20T08:00:00Z', finished_at: '2026-11-20T07:00:00Z' }, 'value_error', ['body', 'finished_at']],
      ];
      for (const [body, type, loc] of cases) {
        const res = await post(body);
        t.equal(res.status, 422, JSON.stringify(body).slice(0, 80));
        t.ok(res.json.detail.some((d: { type: string; loc: unknown[] }) => d.type === type && JSON.stringify(d.loc) === JSON.stringify(loc)), `${type} at ${loc.join('.')}: ${JSON.stringify(res.json.detail).slice(0, 200)}`);
      }
      t.equal((await rows(s, 'conversations')).length, before, 'nothing stored');
    });

    await t.test('authentication and scopes', async (t) => {
      t.equal((await s.req(BASE)).status, 401, 'no key');
      t.equal((await s.req(`${BASE}/${textId}`)).status, 401);
      t.equal((await s.req(BASE, { headers: bearer('svc_dev_nonsense') })).status, 401);
      const noWrite = await post({ text: 'x' }, readOnly);
      t.equal(noWrite.status, 403);
      t.same(noWrite.json, { detail: 'Insufficient permissions. Required scope: conversations:write' });
      t.equal((await post({ transcript_segments: [{ text: 'x', start: 0, end: 1 }] }, readOnly, `${BASE}/from-segments`)).status, 403);
      t.equal((await s.req(`${BASE}/${textId}`, { method: 'PATCH', headers: readOnly, body: { title: 'x' } })).status, 403);
      t.equal((await s.req(`${BASE}/${textId}`, { method: 'DELETE', headers: readOnly })).status, 403);
      const noRead = await s.req(BASE, { headers: writeOnly });
      t.equal(noRead.status, 403);
      t.equal(noRead.headers['x-error-code'], 'ENG_ERR_AUTH_SCOPE_MISSING');
      t.equal((await s.req(`${BASE}/${textId}`, { headers: writeOnly })).status, 403);
    });

    await t.test("another user's or an unknown id answers 404", async (t) => {
      for (const [method, body] of [['GET', undefined], ['PATCH', { title: 'Hijacked' }], ['DELETE', undefined]] as const) {
        const other = await s.req(`${BASE}/${textId}`, { method, headers: bob, ...(body ? { body } : {}) });
        t.equal(other.status, 404, `${method} of another user's conversation`);
        t.same(other.json, { detail: 'Conversation not found' });
        t.equal(other.headers['x-error-code'], 'ENG_ERR_RESOURCE_NOT_FOUND');
        const unknown = await s.req(`${BASE}/00000000-0000-0000-0000-000000000000`, { method, headers: rw, ...(body ? { body } : {}) });
        t.equal(unknown.status, 404, `${method} of an unknown id`);
      }
      const row = (await rows(s, 'conversations')).find((r) => r.id === textId)!;
      t.not(row.title, 'Hijacked', 'nothing changed');
      t.same((await s.req(BASE, { headers: bob })).json, [], "bob sees none of alice's conversations");
    });

    await t.test('patch', async (t) => {
      const empty = await s.req(`${BASE}/${textId}`, { method: 'PATCH', headers: rw, body: {} });
      t.equal(empty.status, 422, 'no field');
      t.equal(empty.json.detail[0].type, 'value_error');
      const blank = await s.req(`${BASE}/${textId}`, { method: 'PATCH', headers: rw, body: { title: '' } });
      t.equal(blank.status, 422);
      const long = await s.req(`${BASE}/${textId}`, { method: 'PATCH', headers: rw, body: { title: 'x'.repeat(501) } });
      t.equal(long.json.detail[0].type, 'string_too_long');
      const wrong = await s.req(`${BASE}/${textId}`, { method: 'PATCH', headers: rw, body: { discarded: 'yes' } });
      t.equal(wrong.json.detail[0].type, 'bool_type');

      const res = await s.req(`${BASE}/${textId}`, { method: 'PATCH', headers: rw, body: { title: 'Dentist and Launch' } });
      t.equal(res.status, 200);
      t.equal(res.json.id, textId);
      t.equal(res.json.structured.title, 'Dentist and Launch');
      t.equal((await rows(s, 'conversations')).find((r) => r.id === textId)!.title, 'Dentist and Launch');

      const hidden = await s.req(`${BASE}/${textId}`, { method: 'PATCH', headers: rw, body: { discarded: true } });
      t.equal(hidden.status, 200);
      t.notOk((await s.req(BASE, { headers: rw })).json.some((c: { id: string }) => c.id === textId), 'a discarded conversation leaves the list');
      await s.req(`${BASE}/${textId}`, { method: 'PATCH', headers: rw, body: { discarded: false } });
      t.ok((await s.req(BASE, { headers: rw })).json.some((c: { id: string }) => c.id === textId), 'and comes back');
    });

    await t.test('delete', async (t) => {
      const res = await post({ text: 'Buy oat milk and call grandma.' });
      const id = res.json.id;
      const del = await s.req(`${BASE}/${id}`, { method: 'DELETE', headers: rw });
      t.equal(del.status, 200);
      t.same(del.json, { success: true });
      t.equal((await s.req(`${BASE}/${id}`, { headers: rw })).status, 404);
      t.notOk((await rows(s, 'conversations')).some((r) => r.id === id), 'row gone');
      t.notOk((await rows(s, 'conversation_segments')).some((r) => r.conversation_id === id), 'transcript gone');
      t.equal((await s.req(`${BASE}/${id}`, { method: 'DELETE', headers: rw })).status, 404, 'twice → 404');
    });
  });

  t.test(`conversation list on ${store}: order, pages, filters`, async (t) => {
    const s = await startService(t, { store });
    const h = bearer(await s.devKey('carol', ['conversations:read', 'conversations:write']));
    const texts = [
      ['2026-11-01T10:00:00Z', 'The chemistry exam is on Friday, I have to study the lecture notes for the professor.'], // education
      ['2026-11-02T10:00:00Z', 'The mortgage payment and the tax bill are due, the budget is tight and the savings are low.'], // finance
      ['2026-11-03T10:00:00Z', 'We need to fix the backend bug in the database server before the API deploy.'], // technology
      ['2026-11-04T10:00:00Z', 'The forecast says heavy rain and a storm all weekend with snow in the mountains.'], // weather
      ['2026-11-04T10:00:00Z', 'The deploy of the new app to the cloud server broke the API and the database.'], // technology, same start
    ];
    const ids: string[] = [];
    for (const [startedAt, text] of texts) {
      const res = await s.req(BASE, { method: 'POST', headers: h, body: { text, started_at: startedAt } });
      t.equal(res.status, 200);
      ids.push(res.json.id);
    }
    const list = async (q: string) => {
      const res = await s.req(`${BASE}${q}`, { headers: h });
      t.equal(res.status, 200, q);
      return res.json as Array<{ id: string; started_at: string; structured: { category: string }; transcript_segments: unknown }>;
    };
    const all = await list('');
    t.equal(all.length, 5);
    t.same(all.map((c) => c.started_at), ['2026-11-04T10:00:00.000Z', '2026-11-04T10:00:00.000Z', '2026-11-03T10:00:00.000Z', '2026-11-02T10:00:00.000Z', '2026-11-01T10:00:00.000Z'], 'newest first');
    const tie = [ids[3]!, ids[4]!].sort().reverse();
    t.same(all.slice(0, 2).map((c) => c.id), tie, 'ties broken by id, descending');
    t.ok(all.every((c) => c.transcript_segments === null), 'no transcript by default');

    const page1 = await list('?limit=2');
    const page2 = await list('?limit=2&offset=2');
    const page3 = await list('?limit=2&offset=4');
    t.same([...page1, ...page2, ...page3].map((c) => c.id), all.map((c) => c.id), 'pages join up');
    t.equal(page3.length, 1);
    t.same(await list('?offset=10'), []);

    const withT = await list('?include_transcript=true&limit=1');
    t.match(withT[0]!.transcript_segments, [{ text: String, speaker_name: 'Speaker 0' }]);

    t.same((await list('?start_date=2026-11-02T00:00:00Z&end_date=2026-11-03T23:59:59Z')).map((c) => c.id), [ids[2], ids[1]], 'date window');
    t.same((await list('?start_date=2026-11-04')).length, 2, 'a bare start date');
    t.same((await list('?end_date=2026-11-01')).map((c) => c.id), [ids[0]], 'a bare end date includes the whole day');

    const tech = await list('?categories=technology');
    t.ok(tech.length >= 1 && tech.every((c) => c.structured.category === 'technology'), 'category filter');
    const two = await list('?categories=weather,%20finance');
    t.same(two.map((c) => c.structured.category).sort(), ['finance', 'weather']);

    const bad = await s.req(`${BASE}?categories=technology,gossip`, { headers: h });
    t.equal(bad.status, 400);
    t.equal(bad.headers['x-error-code'], 'ENG_ERR_CATEGORY_INVALID');

    for (const q of ['?limit=0', '?offset=-1', '?limit=abc', '?start_date=not-a-date', '?include_transcript=maybe']) {
      const res = await s.req(`${BASE}${q}`, { headers: h });
      t.equal(res.status, 422, q);
    }
    t.equal((await list(`?limit=${MAX_CONVERSATIONS_PAGE + 1}`)).length, 5, 'a limit above the page size is served, not refused');
  });
}
