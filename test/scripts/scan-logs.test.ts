// The log scan's rules find each kind of secret and user content, mask what they found, and leave ordinary log
// lines alone; scripts/scan-logs.mjs applies them to a directory and fails on a hit.
import t from 'tap';
import { execFileSync, spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { generateKey } from '../../engine/identity/key-format.js';
import { scanLines } from '../helpers/log-scan.js';

const devKey = generateKey('dev').key;
const appSecret = generateKey('app').key;
const jwt = `eyJhbGciOiJFUzI1NiIsImtpZCI6IjEifQ.${Buffer.from(JSON.stringify({ sub: 'u1', exp: 1 })).toString('base64url')}.c2lnbmF0dXJlLWJ5dGVz`;
const line = (fields: Record<string, unknown>): string => JSON.stringify({ level: 30, time: '2026-12-02T10:00:00.000Z', service: 'wearable-backend', ...fields, msg: 'something happened' });

const CASES: [string, string][] = [
  ['api key', line({ header: devKey })],
  ['api key', line({ secret: appSecret })],
  ['webhook secret', line({ s: `whsec_${Buffer.alloc(32, 7).toString('base64')}` })],
  ['id token', line({ t: jwt })],
  ['authorization value', line({ h: 'Bearer abc123defghijklmnop' })],
  ['authorization field', line({ req: { headers: { authorization: 'anything' } } })],
  ['base64 run', line({ audio: Buffer.alloc(600, 3).toString('base64') })],
  ['raw sample array', line({ pcm: { type: 'Buffer', data: [...Buffer.alloc(100, 9)] } })],
  ['raw sample object', line({ pcm: { ...new Int16Array(100).fill(-12) } })],
  ['user content', line({ text: 'I need to WATER the tulips tomorrow' })],
];

t.test('each rule finds its kind, and masks it', async (t) => {
  for (const [rule, l] of CASES) {
    const hits = scanLines([l], 'case', { phrases: ['water the tulips'] });
    t.ok(hits.some((h) => h.rule === rule), `${rule} found`);
    for (const h of hits) t.notOk(h.masked.includes(devKey) || h.masked.includes(jwt) || h.masked.includes(appSecret), `${rule}: masked`);
  }
  t.same(scanLines([line({ secret: 'the-one-secret' })], 'case', { secrets: ['the-one-secret'] }).map((h) => h.rule), ['known secret']);
});

t.test('ordinary lines are left alone', async (t) => {
  const ordinary = [
    line({ keyId: 'key_0123456789abcdef', prefix: `${devKey.slice(0, 12)}...${devKey.slice(-4)}` }),
    line({ conversationId: '3f1c2a9e-8b7d-4c6e-9f0a-1b2c3d4e5f60', durationMs: 1234, samples: [1, 2, 3] }),
    line({ err: { name: 'Error', stack: '    at run (/srv/app/dist/engine/listen/session-actor.js:120:13)\n    at process.processTicksAndRejections (node:internal/process/task_queues:95:5)' } }),
    line({ authorization: '[redacted]', reason: 'Bearer error="invalid_token"', note: 'basic information about the bearer of the device' }),
    // A key whose checksum does not match is not a key.
    line({ got: `${devKey.slice(0, -1)}${devKey.endsWith('A') ? 'B' : 'A'}` }),
  ];
  t.same(scanLines(ordinary, 'ordinary', { phrases: ['water the tulips'] }), []);
});

t.test('scripts/scan-logs.mjs: exit 1 with masked hits, 0 on clean logs', async (t) => {
  const dir = t.testdir();
  const script = path.resolve('scripts/scan-logs.mjs');
  writeFileSync(path.join(dir, 'clean.log'), `${line({ keyId: 'k1' })}\n`);
  t.match(execFileSync('node', [script, dir], { encoding: 'utf8' }), /0 hits/);
  writeFileSync(path.join(dir, 'leak.log'), `${line({ key: devKey })}\n${line({ text: 'The quick brown fox jumps over the lazy dog near the river bank.' })}\n`);
  const r = spawnSync('node', [script, dir], { encoding: 'utf8' });
  t.equal(r.status, 1);
  t.match(r.stdout, /leak\.log:1 \[api key\]/);
  t.match(r.stdout, /leak\.log:2 \[user content\]/, 'a phrase the fixtures speak is found');
  t.notOk(r.stdout.includes(devKey), 'the key is masked in the report');
});
