// API key format: family prefix, 128+ bits of randomness, an offline checksum, and a prefix that does not reveal the key.
import t from 'tap';
import { generateKey, parseKey, displayPrefix, hashKey } from '../../../engine/identity/key-format.js';

t.test('generated keys parse as their family', async (t) => {
  const dev = generateKey('dev');
  const mcp = generateKey('mcp');
  t.match(dev.key, /^svc_dev_[0-9A-Za-z]{28}$/);
  t.match(mcp.key, /^svc_mcp_[0-9A-Za-z]{28}$/);
  t.equal(parseKey(dev.key), 'dev');
  t.equal(parseKey(mcp.key), 'mcp');
  t.equal(dev.hash, hashKey(dev.key));
  t.equal(dev.prefix, displayPrefix(dev.key));
  t.equal(dev.prefix.length, 19);
  t.notOk(dev.prefix.includes(dev.key.slice(12, 32)), 'the middle of the key is not shown');
});

t.test('keys do not repeat', async (t) => {
  const seen = new Set<string>();
  for (let i = 0; i < 2000; i++) seen.add(generateKey('dev').key);
  t.equal(seen.size, 2000);
});

t.test('a typo fails the checksum offline', async (t) => {
  const { key } = generateKey('dev');
  let caught = 0;
  for (let i = 8; i < key.length; i++) {
    const c = key[i] === 'x' ? 'y' : 'x';
    if (parseKey(key.slice(0, i) + c + key.slice(i + 1)) === undefined) caught++;
  }
  t.equal(caught, key.length - 8, 'every single-character change is caught');
  t.equal(parseKey(key.replace('svc_dev_', 'svc_mcp_')), undefined, 'the family is part of the checksum');
  t.equal(parseKey(key + 'a'), undefined);
  t.equal(parseKey('svc_dev_'), undefined);
  t.equal(parseKey(''), undefined);
});
