// The live loop's activity-time update on sqlite looks each write's conversation up by id. Planned through the status
// index instead, it walked every in-progress conversation and scanned the group's terms for each: a node with 800
// sessions spent a sixth of a core on that one statement.
import t from 'tap';
import { openStore } from '../../../engine/db/store.js';
import { LIVE_TOUCH_SQLITE } from '../../../engine/db/conversations.js';

t.test('the live activity-time update scans the terms once and finds each conversation by id', async (t) => {
  const store = openStore({ dataDir: t.testdir(), databaseUrl: undefined, databaseSchema: 'public' });
  t.teardown(() => store.close());
  await store.migrate();
  const plan = ((await store.knex.raw(`EXPLAIN QUERY PLAN ${LIVE_TOUCH_SQLITE}`, ['[]'])) as { detail: string }[]).map((r) => r.detail);
  t.match(plan[0], /^SCAN j VIRTUAL TABLE/, 'the JSON terms are the outer loop');
  t.match(plan[1], /^SEARCH conversations USING .*INDEX sqlite_autoindex_conversations_1 \(id=\?\)/, 'each conversation by its id');
  t.equal(plan.length, 2, plan.join(' | '));
});
