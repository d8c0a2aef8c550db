// The memory list the store serialises itself (listJson) is the developer view of `list`, on sqlite and PostgreSQL.
import t from 'tap';
import { MemoriesRepository, type MemoryCategory } from '../../../engine/db/memories.js';
import { UNVERSIONED } from '../../../engine/cache/data-versions.js';
import { view } from '../../../http/routes/memories.js';
import { STORES, openTestStore } from '../../helpers/stores.js';

const NOW = Date.UTC(2026, 10, 23, 10, 0, 0);

for (const kind of STORES) {
  t.test(`listJson equals the view of list on ${kind}`, async (t) => {
    const store = openTestStore(t, kind);
    await store.migrate();
    const repo = new MemoriesRepository(store.knex, store.dialect, UNVERSIONED);

    t.equal(await repo.listJson('u1', { limit: 25, offset: 0 }), '[]', 'no memories: an empty array');
    // PostgreSQL text cannot hold U+0000; everything else a client may send goes to both stores.
    const odd = `Quotes " and \\ backslash, tab\t, newline\n, \u0001, é, 😀, \u2028${kind === 'sqlite' ? ', \u0000' : ''}`;
    await repo.createMany('u1', [
      { content: odd, category: 'core', visibility: 'public', tags: ['a "tag"', 'ünï'] },
      { content: 'Plain', category: 'work', visibility: 'private', tags: [] },
    ], NOW);
    await repo.create('u1', { content: 'Later', category: 'hobbies', visibility: 'private', tags: ['x'] }, NOW + 1000);
    await repo.createFromConversation('u1', 'conv-1', [{ content: 'Extracted', category: 'skills' }], NOW + 2000);
    await repo.create('u2', { content: 'Not yours', category: 'core', visibility: 'private', tags: [] }, NOW);

    const pages: { limit: number; offset: number; categories?: MemoryCategory[] }[] = [
      { limit: 25, offset: 0 },
      { limit: 2, offset: 0 },
      { limit: 2, offset: 2 },
      { limit: 25, offset: 9 },
      { limit: 25, offset: 0, categories: ['core', 'skills'] },
      { limit: 1, offset: 0, categories: ['work'] },
    ];
    for (const page of pages) {
      const text = await repo.listJson('u1', page);
      t.same(JSON.parse(text), (await repo.list('u1', page)).map(view), JSON.stringify(page));
    }
    const all = JSON.parse(await repo.listJson('u1', { limit: 25, offset: 0 })) as { content: string; manually_added: boolean }[];
    t.same(all.slice(0, 2).map((m) => m.content), ['Extracted', 'Later'], 'newest first');
    t.same(all.slice(2).map((m) => m.content).sort(), [odd, 'Plain'].sort(), 'then the batch (ties by id)');
    t.equal(all.find((m) => m.content === odd)?.content, odd, 'content survives byte for byte');
    t.same(all.map((m) => m.manually_added), [false, true, true, true]);
  });
}
