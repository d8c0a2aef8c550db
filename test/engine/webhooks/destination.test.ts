// The destination guard: which addresses are refused and why, at check time and at connect time (a name that
// resolved public when saved and private when sent), pinning to the checked address, and redirects not followed.
import t, { type Test } from 'tap';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { classifyAddress, DestinationGuard, DestinationRefused, guardedRequest, type ResolvedAddress } from '../../../engine/webhooks/destination.js';

const CASES: [string, string | undefined][] = [
  ['127.0.0.1', 'loopback'],
  ['127.255.0.9', 'loopback'],
  ['::1', 'loopback'],
  ['::ffff:127.0.0.1', 'loopback'],
  ['::ffff:7f00:1', 'loopback'],
  ['10.0.0.1', 'private'],
  ['::ffff:10.0.0.1', 'private'],
  ['172.16.0.1', 'private'],
  ['172.31.255.255', 'private'],
  ['192.168.1.20', 'private'],
  ['fc00::1', 'private'],
  ['fd12:3456::1', 'private'],
  ['169.254.10.1', 'link-local'],
  ['fe80::1', 'link-local'],
  ['100.64.0.1', 'cgnat'],
  ['100.127.255.254', 'cgnat'],
  ['0.0.0.0', 'unspecified'],
  ['::', 'unspecified'],
  ['224.0.0.1', 'multicast'],
  ['ff02::1', 'multicast'],
  ['169.254.169.254', 'metadata'],
  ['::ffff:169.254.169.254', 'metadata'],
  ['fd00:ec2::254', 'metadata'],
  ['100.100.100.200', 'metadata'],
  ['192.0.2.1', 'reserved'],
  ['8.8.8.8', undefined],
  ['172.32.0.1', undefined],
  ['100.128.0.1', undefined],
  ['2606:4700::1111', undefined],
];

t.test('addresses are classified by rule', async (t) => {
  for (const [address, rule] of CASES) t.equal(classifyAddress(address), rule, `${address}: ${rule ?? 'public'}`);
});

/** A resolver answering from a table and counting its calls. */
function resolver(table: Record<string, string[] | (() => string[])>): { resolve: (h: string) => Promise<ResolvedAddress[]>; calls: string[] } {
  const calls: string[] = [];
  return {
    calls,
    async resolve(host) {
      calls.push(host);
      const entry = table[host];
      if (entry === undefined) throw Object.assign(new Error('not found'), { code: 'ENOTFOUND' });
      const list = typeof entry === 'function' ? entry() : entry;
      return list.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
    },
  };
}

async function refusal(p: Promise<unknown>): Promise<string | undefined> {
  try {
    await p;
    return undefined;
  } catch (err) {
    return err instanceof DestinationRefused ? err.rule : `other: ${(err as Error).message}`;
  }
}

t.test('check: form and address rules, private allowed only when asked, metadata never', async (t) => {
  const r = resolver({ 'hooks.example.com': ['93.184.215.14'], 'mixed.example.com': ['93.184.215.14', '10.1.2.3'], 'inside.example.com': ['192.168.0.7'], 'meta.example.com': ['169.254.169.254'] });
  const strict = new DestinationGuard({ allowPrivate: false, resolve: r.resolve });
  const open = new DestinationGuard({ allowPrivate: true, resolve: r.resolve });
  const rows: [string, string | undefined, string | undefined][] = [
    // url, strict, allowPrivate
    ['https://hooks.example.com/x', undefined, undefined],
    ['ftp://hooks.example.com/x', 'scheme', 'scheme'],
    ['javascript:alert(1)', 'scheme', 'scheme'],
    ['https://user:pw@hooks.example.com/x', 'credentials', 'credentials'],
    ['http://127.0.0.1:8080/x', 'loopback', undefined],
    ['http://0x7f.1/x', 'loopback', undefined],
    ['http://2130706433/x', 'loopback', undefined],
    ['http://[::1]:9/x', 'loopback', undefined],
    ['http://[::ffff:10.0.0.1]/x', 'private', undefined],
    ['http://10.0.0.1/x', 'private', undefined],
    ['http://inside.example.com/x', 'private', undefined],
    ['http://mixed.example.com/x', 'private', undefined],
    ['http://169.254.169.254/latest/meta-data/', 'metadata', 'metadata'],
    ['http://[fd00:ec2::254]/latest', 'metadata', 'metadata'],
    ['http://meta.example.com/x', 'metadata', 'metadata'],
    ['http://metadata.google.internal/computeMetadata/v1/', 'metadata', 'metadata'],
    ['http://METADATA.google.internal./x', 'metadata', 'metadata'],
    ['http://nowhere.example.com/x', 'unresolvable', 'unresolvable'],
  ];
  for (const [url, strictRule, openRule] of rows) {
    t.equal(await refusal(strict.check(url)), strictRule, `${url} without WEBHOOK_ALLOW_PRIVATE: ${strictRule ?? 'accepted'}`);
    t.equal(await refusal(open.check(url)), openRule, `${url} with WEBHOOK_ALLOW_PRIVATE: ${openRule ?? 'accepted'}`);
  }
  t.notOk(r.calls.includes('metadata.google.internal'), 'metadata names are refused without a lookup');
  const err = await strict.check('https://user:s3cret-pw@hooks.example.com/x?token=tok-123').catch((e: Error) => e);
  t.notMatch(String((err as Error).message), /s3cret|tok-123|hooks\.example/, 'the refusal never quotes the URL');
});

/** A local receiver counting requests; `answer` decides each reply. */
async function receiver(t: Test, answer: (req: http.IncomingMessage, res: http.ServerResponse) => void): Promise<{ port: number; seen: http.IncomingMessage[] }> {
  const seen: http.IncomingMessage[] = [];
  const server = http.createServer((req, res) => {
    seen.push(req);
    answer(req, res);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => server.close(() => r())));
  return { port: (server.address() as AddressInfo).port, seen };
}

t.test('connect time: a name that resolved public at save and private at send is refused, and nothing is sent', async (t) => {
  const rx = await receiver(t, (_req, res) => res.end('ok'));
  let answers = 0;
  const r = resolver({ 'rebind.example.com': () => (answers++ === 0 ? ['93.184.215.14'] : ['127.0.0.1']) });
  const guard = new DestinationGuard({ allowPrivate: false, resolve: r.resolve });
  const url = `http://rebind.example.com:${rx.port}/hook`;
  t.equal((await guard.check(url)).address, '93.184.215.14', 'accepted when saved');
  t.equal(await refusal(guardedRequest(guard, url, { method: 'POST', body: '{}', timeoutMs: 2000 })), 'loopback', 'refused when sent');
  t.equal(rx.seen.length, 0, 'the receiver saw no request');
  t.same(r.calls, ['rebind.example.com', 'rebind.example.com'], 'resolved once per check');

  // The lookup function for an http.Agent applies the same check on every connection.
  const viaLookup = await new Promise<string>((resolve) => {
    const req = http.request(url, { method: 'POST', lookup: guard.lookup(), agent: false }, () => resolve('connected'));
    req.on('error', (e) => resolve(e instanceof DestinationRefused ? e.rule : e.message));
    req.end('{}');
  });
  t.equal(viaLookup, 'loopback', 'an agent using lookup() refuses it too');
  t.equal(rx.seen.length, 0);
});

t.test('a request connects to the checked address, keeps the host name, and does not follow redirects', async (t) => {
  const rx = await receiver(t, (req, res) => {
    if (req.url === '/moved') {
      res.writeHead(302, { location: `http://10.0.0.1/elsewhere` });
      res.end();
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ host: req.headers.host }));
  });
  const r = resolver({ 'hooks.example.test': ['127.0.0.1'] });
  const guard = new DestinationGuard({ allowPrivate: true, resolve: r.resolve });
  const res = await guardedRequest(guard, `http://hooks.example.test:${rx.port}/hook`, { method: 'POST', body: '{"a":1}', headers: { 'content-type': 'application/json' }, timeoutMs: 2000 });
  t.equal(res.status, 200);
  t.equal(res.address, '127.0.0.1');
  t.same(JSON.parse(res.body.toString()), { host: `hooks.example.test:${rx.port}` }, 'Host is the URL host, not the address');
  t.same(r.calls, ['hooks.example.test'], 'resolved once: the connection used the checked address');

  const moved = await guardedRequest(guard, `http://hooks.example.test:${rx.port}/moved`, { timeoutMs: 2000 });
  t.equal(moved.status, 302, 'the redirect is the answer');
  t.equal(rx.seen.length, 2, 'and was not followed');
});

t.test('a request that gets no answer times out', async (t) => {
  const rx = await receiver(t, () => undefined);
  const guard = new DestinationGuard({ allowPrivate: true });
  const err = await guardedRequest(guard, `http://127.0.0.1:${rx.port}/slow`, { timeoutMs: 100 }).catch((e: Error) => e);
  t.equal((err as Error).name, 'TimeoutError');
});
