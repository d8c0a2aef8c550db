// Date-times without an offset are read as UTC, in every body field and query parameter; a bad one says what is expected.
import t from 'tap';
import { startService } from '../helpers/service.js';
import { bearer } from '../helpers/http.js';

t.test('naive date-times are UTC everywhere', async (t) => {
  const s = await startService(t);
  s.clock.set(Date.UTC(2026, 11, 1, 12, 0, 0));
  const key = await s.devKey('dora', ['action_items:read', 'action_items:write', 'conversations:read', 'conversations:write']);
  const h = bearer(key);

  const created = await s.req('/v1/dev/user/action-items', { method: 'POST', headers: h, body: { description: 'call the dentist', due_at: '2026-12-02T09:00:00' } });
  t.equal(created.status, 200, JSON.stringify(created.json));
  t.equal(created.json.due_at, '2026-12-02T09:00:00.000Z', 'no offset: UTC');

  const spaced = await s.req(`/v1/dev/user/action-items/${created.json.id}`, { method: 'PATCH', headers: h, body: { due_at: '2026-12-03 07:30' } });
  t.equal(spaced.status, 200, JSON.stringify(spaced.json));
  t.equal(spaced.json.due_at, '2026-12-03T07:30:00.000Z', 'a space separator and no seconds, as pydantic accepts');

  const offset = await s.req('/v1/dev/user/action-items/batch', { method: 'POST', headers: h, body: { action_items: [{ description: 'a', due_at: '2026-12-02T09:00:00+01:00' }, { description: 'b', due_at: '2026-12-02T09:00:00.250' }] } });
  t.same(offset.json.action_items.map((i: { due_at: string }) => i.due_at), ['2026-12-02T08:00:00.000Z', '2026-12-02T09:00:00.250Z'], 'offsets still apply');

  const listed = await s.req('/v1/dev/user/action-items?start_date=2026-12-01T11:59:59&end_date=2026-12-01T12:00:01', { headers: h });
  t.equal(listed.status, 200, JSON.stringify(listed.json));
  t.equal(listed.json.length, 3, 'naive query bounds are UTC too');
  const none = await s.req('/v1/dev/user/action-items?start_date=2026-12-01T12:00:01', { headers: h });
  t.same(none.json, [], 'and they bound what they say');

  const conv = await s.req('/v1/dev/user/conversations', { method: 'POST', headers: h, body: { text: 'We agreed to meet on Friday about the budget.', started_at: '2026-11-30T10:00:00', finished_at: '2026-11-30T10:05:00' } });
  t.equal(conv.status, 200, JSON.stringify(conv.json));
  const got = await s.req(`/v1/dev/user/conversations/${conv.json.id}`, { headers: h });
  t.equal(got.json.started_at, '2026-11-30T10:00:00.000Z');
  t.equal(got.json.finished_at, '2026-11-30T10:05:00.000Z');
  const convList = await s.req('/v1/dev/user/conversations?start_date=2026-11-30T10:00:00&end_date=2026-11-30T10:00:00', { headers: h });
  t.same(convList.json.map((c: { id: string }) => c.id), [conv.json.id]);

  const bad = await s.req('/v1/dev/user/action-items', { method: 'POST', headers: h, body: { description: 'x', due_at: '02/12/2026 9am' } });
  t.equal(bad.status, 422);
  t.same(bad.json.detail, [{
    loc: ['body', 'due_at'],
    msg: 'Input should be a valid datetime, expected an ISO 8601 date-time such as 2026-12-02T09:00:00Z (read as UTC without an offset)',
    type: 'datetime_parsing',
  }]);
  const impossible = await s.req('/v1/dev/user/action-items', { method: 'POST', headers: h, body: { description: 'x', due_at: '2026-02-30T09:00:00' } });
  t.equal(impossible.status, 422, 'February 30th is no day');
  const badQuery = await s.req('/v1/dev/user/action-items?start_date=soon', { headers: h });
  t.equal(badQuery.status, 422);
  t.same(badQuery.json.detail.length, 1, 'one issue for a bound that may be a date or a date-time');
  t.match(badQuery.json.detail[0], { loc: ['query', 'start_date'], type: 'datetime_parsing', msg: /date or datetime/ });
});
