// Every write of the versioned tables (memories, action items, goals, the memory gate) runs inside `versions.write`
// for the user it changes, so nodes caching answers about that user hear of it (docs/patterns/cached-reads.md).
import t from 'tap';
import { openStore } from '../../../engine/db/store.js';
import { MemoriesRepository } from '../../../engine/db/memories.js';
import { ActionItemsRepository } from '../../../engine/db/action-items.js';
import { GoalsRepository } from '../../../engine/db/goals.js';
import { UsersRepository } from '../../../engine/db/users.js';
import type { VersionedWrites } from '../../../engine/cache/data-versions.js';

const NOW = Date.UTC(2026, 10, 23, 10, 0, 0);
const VERSIONED = /^(insert into|update|delete from) [`"]?(memories|action_items|goals|goal_history)\b|^update [`"]?users[`"]? set [`"]?memory_access_enabled/i;

t.test('writes of versioned data happen inside versions.write, for their user', async (t) => {
  const store = openStore({ dataDir: t.testdir(), databaseUrl: undefined, databaseSchema: 'public' });
  t.teardown(() => store.close());
  await store.migrate();

  let inside: string | undefined;
  const announced: string[] = [];
  const versions: VersionedWrites = {
    async write(uid, run) {
      announced.push(uid);
      inside = uid;
      try {
        return await run();
      } finally {
        inside = undefined;
      }
    },
  };
  const unannounced: string[] = [];
  store.knex.on('query', (q: { sql: string }) => {
    if (VERSIONED.test(q.sql) && inside === undefined) unannounced.push(q.sql);
  });

  const memories = new MemoriesRepository(store.knex, store.dialect, versions);
  const items = new ActionItemsRepository(store.knex, versions);
  const goals = new GoalsRepository(store.knex, store.dialect, versions);
  const users = new UsersRepository(store.knex, versions);

  const m = await memories.create('u1', { content: 'a', category: 'other', visibility: 'private', tags: [] }, NOW);
  await memories.createMany('u1', [{ content: 'b', category: 'core', visibility: 'public', tags: ['x'] }], NOW);
  await memories.createFromConversation('u1', 'c1', [{ content: 'c', category: 'work' }], NOW);
  await memories.update('u1', m.id, { content: 'a2' }, NOW);
  await memories.delete('u1', m.id);
  const i = await items.create('u1', { description: 'd', completed: false, dueAt: null }, NOW);
  await items.createMany('u1', [{ description: 'e', completed: true, dueAt: null }], NOW);
  await items.createFromConversation('u1', 'c1', [{ description: 'f', dueAt: null }], NOW);
  await items.update('u1', i.id, { completed: true }, NOW);
  await items.delete('u1', i.id);
  const g = await goals.create('u1', { title: 'g', goalType: 'numeric', targetValue: 10, currentValue: 0, minValue: 0, maxValue: 100, unit: null }, NOW);
  for (let n = 0; n < 3; n++) await goals.create('u1', { title: `g${n}`, goalType: 'numeric', targetValue: 10, currentValue: 0, minValue: 0, maxValue: 100, unit: null }, NOW + n + 1);
  await goals.update('u1', g.id, { title: 'g2' }, NOW);
  await goals.setProgress('u1', g.id, 5, NOW);
  await goals.delete('u1', g.id);
  await users.setMemoryAccess('u1', false, NOW);

  t.same(unannounced, [], 'no versioned write ran outside versions.write');
  t.ok(announced.length >= 16, 'each write was announced');
  t.same([...new Set(announced)], ['u1'], 'for the user whose data it changed');
});
