// The versioned LRU behind the response cache and the memory gate: answers only for their own version, bounded by size.
import t from 'tap';
import { VersionedCache } from '../../../engine/cache/versioned-cache.js';

t.test('a value is returned only for the version it was computed under', async (t) => {
  const c = new VersionedCache<string>(100);
  c.set('alice', 'v1', 'old');
  t.equal(c.get('alice', 'v1'), 'old');
  t.equal(c.get('alice', 'v2'), undefined, 'a newer version misses');
  c.set('alice', 'v2', 'new');
  t.equal(c.get('alice', 'v1'), undefined, 'one value per key: the newer replaced the older');
  t.equal(c.get('alice', 'v2'), 'new');
  t.equal(c.size, 1);
});

t.test('the least recently used values go first once the sizes exceed the bound', async (t) => {
  const c = new VersionedCache<string>(10);
  c.set('a', 'v', 'A', 4);
  c.set('b', 'v', 'B', 4);
  t.equal(c.get('a', 'v'), 'A', 'a is now the most recently used');
  c.set('c', 'v', 'C', 4);
  t.equal(c.get('b', 'v'), undefined, 'b was the least recently used');
  t.equal(c.get('a', 'v'), 'A');
  t.equal(c.get('c', 'v'), 'C');
  t.equal(c.size, 8);
  c.set('big', 'v', 'too big', 11);
  t.equal(c.get('big', 'v'), undefined, 'a value larger than the whole cache is not kept');
  t.equal(c.size, 8, 'and evicts nothing');
  c.set('a', 'v2', 'A2', 2);
  t.equal(c.size, 6, 'replacing a value gives back its size');
  c.delete('c');
  c.clear();
  t.equal(c.size, 0);
  t.equal(c.get('a', 'v2'), undefined);
});
