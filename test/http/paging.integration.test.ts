// Any positive `limit` is accepted on list routes; a page holds at most the route's page size, and X-Has-More and
// Link (rel="next") tell the client whether to ask again.
import t from 'tap';
import { startService } from '../helpers/service.js';
import { bearer } from '../helpers/http.js';
import { MAX_MEMORIES_PAGE } from '../../http/routes/memories.js';
import { MAX_CONVERSATIONS_PAGE } from '../../http/routes/conversations.js';

t.test('a large limit is served in pages', async (t) => {
  const s = await startService(t, { env: { RATE_LIMIT_PER_MINUTE: '1000' } });
  const key = await s.devKey('fay', ['memories:read', 'memories:write', 'action_items:read', 'action_items:write', 'conversations:read', 'goals:read']);
  const h = bearer(key);
  const total = MAX_MEMORIES_PAGE + 20;
  for (let i = 0; i < total; i += 25) {
    const memories = Array.from({ length: Math.min(25, total - i) }, (_, j) => ({ content: `fact ${i + j}` }));
    s.clock.advance(1000);
    t.equal((await s.req('/v1/dev/user/memories/batch', { method: 'POST', headers: h, body: { memories } })).status, 200);
  }

  const first = await s.req('/v1/dev/user/memories?limit=1000', { headers: h });
  t.equal(first.status, 200, 'limit=1000 is accepted, as by the compatible system');
  t.equal(first.json.length, MAX_MEMORIES_PAGE, 'one page at most');
  t.equal(first.headers['x-has-more'], 'true');
  t.equal(first.headers.link, `</v1/dev/user/memories?limit=1000&offset=${MAX_MEMORIES_PAGE}>; rel="next"`);
  const link = String(first.headers.link);
  const next = link.slice(1, link.indexOf(">"));
  const second = await s.req(next, { headers: h });
  t.equal(second.json.length, 20, 'the next page holds the rest');
  t.equal(second.headers['x-has-more'], 'false');
  t.equal(second.headers.link, undefined, 'no next page');
  const seen = new Set([...first.json, ...second.json].map((m: { id: string }) => m.id));
  t.equal(seen.size, total, 'every memory once');

  const cached = await s.req('/v1/dev/user/memories?limit=1000', { headers: h });
  t.equal(cached.headers['x-has-more'], 'true', 'a reused answer keeps its paging headers');
  t.equal(cached.headers.link, first.headers.link);

  const exact = await s.req(`/v1/dev/user/memories?limit=20&offset=${MAX_MEMORIES_PAGE}`, { headers: h });
  t.equal(exact.headers['x-has-more'], 'false', 'a page that ends with the list says so');
  const filtered = await s.req('/v1/dev/user/memories?limit=3&categories=other', { headers: h });
  t.equal(filtered.headers.link, '</v1/dev/user/memories?limit=3&offset=3&categories=other>; rel="next"', 'the next link keeps the filters');

  const huge = await s.req('/v1/dev/user/action-items?limit=100000', { headers: h });
  t.equal(huge.status, 200);
  t.same(huge.json, []);
  t.equal(huge.headers['x-has-more'], 'false');
  const conv = await s.req(`/v1/dev/user/conversations?limit=${MAX_CONVERSATIONS_PAGE * 10}&include_transcript=true`, { headers: h });
  t.equal(conv.status, 200);
  t.equal(conv.headers['x-has-more'], 'false');
  const goals = await s.req('/v1/dev/user/goals?limit=5000', { headers: h });
  t.equal(goals.status, 200);
  t.equal(goals.headers['x-has-more'], 'false');

  for (const bad of ['limit=0', 'limit=-1', 'limit=abc', 'offset=-1']) {
    t.equal((await s.req(`/v1/dev/user/memories?${bad}`, { headers: h })).status, 422, `${bad} is still refused`);
  }
});
