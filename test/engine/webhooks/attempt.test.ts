// One delivery attempt against a real receiver: signatures the official Standard Webhooks package accepts (both
// secrets during a rotation, binary bodies byte for byte), what each answer means, Retry-After, and keep-alive reuse.
import t, { type Test } from 'tap';
import http from 'node:http';
import { createHmac, randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';
import { DestinationGuard } from '../../../engine/webhooks/destination.js';
import { attemptDelivery, classifyStatus, deliveryClient, retryAfterMs } from '../../../engine/webhooks/attempt.js';
import { DeliveryClient } from '../../../engine/webhooks/client.js';
import { generateSecret } from '../../../engine/webhooks/secrets.js';

interface Seen {
  headers: http.IncomingHttpHeaders;
  body: Buffer;
  port: number;
}

async function receiver(t: Test, answer: (req: http.IncomingMessage, res: http.ServerResponse, body: Buffer) => void): Promise<{ url: string; seen: Seen[] }> {
  const seen: Seen[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      seen.push({ headers: req.headers, body, port: req.socket.remotePort ?? 0 });
      answer(req, res, body);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => { server.closeAllConnections(); server.close(() => r()); }));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook?uid=u1`, seen };
}

const guard = new DestinationGuard({ allowPrivate: true });
const now = (): number => Date.now();

t.test('a delivery verifies with the Standard Webhooks package, with either secret during a rotation', async (t) => {
  const rx = await receiver(t, (_q, res) => res.end('{"message":"Saved to your notes"}'));
  const [fresh, old] = [generateSecret(), generateSecret()];
  const body = JSON.stringify({ id: 'c1', text: 'héllo ✓' });
  const ts = Math.floor(Date.now() / 1000);
  const r = await attemptDelivery(guard, { url: rx.url, webhookId: 'msg_1', timestampS: ts, body, secrets: [fresh, old] }, { now });
  t.equal(r.outcome, 'delivered');
  t.equal(r.status, 200);
  t.same(JSON.parse(r.reply.toString()), { message: 'Saved to your notes' }, 'the reply is handed back');
  const got = rx.seen[0]!;
  t.equal(got.headers['content-type'], 'application/json');
  t.equal(got.headers['webhook-id'], 'msg_1');
  t.equal(got.headers['webhook-timestamp'], String(ts));
  t.equal((got.headers['webhook-signature'] as string).split(' ').length, 2, 'one signature per valid secret');
  for (const s of [fresh, old]) t.same(new Webhook(s).verify(got.body.toString(), got.headers as Record<string, string>), JSON.parse(body), 'verifies with each secret');
  t.throws(() => new Webhook(generateSecret()).verify(got.body.toString(), got.headers as Record<string, string>), 'another secret does not verify');
});

t.test('a binary body is signed over its exact bytes', async (t) => {
  const rx = await receiver(t, (_q, res) => res.end());
  const secret = generateSecret();
  const pcm = randomBytes(3200);
  const r = await attemptDelivery(guard, { url: rx.url, webhookId: 'msg_pcm', timestampS: 1_800_000_000, body: pcm, contentType: 'application/octet-stream', secrets: [secret] }, { now });
  t.equal(r.outcome, 'delivered');
  const got = rx.seen[0]!;
  t.same(got.body, pcm, 'bytes arrive unchanged');
  const key = Buffer.from(secret.slice('whsec_'.length), 'base64');
  const want = createHmac('sha256', key).update(Buffer.concat([Buffer.from('msg_pcm.1800000000.'), got.body])).digest('base64');
  t.equal(got.headers['webhook-signature'], `v1,${want}`);
});

t.test('what each answer means', async (t) => {
  t.equal(classifyStatus(204), 'delivered');
  t.equal(classifyStatus(410), 'gone');
  for (const s of [408, 429, 500, 502, 503]) t.equal(classifyStatus(s), 'retry', String(s));
  for (const s of [301, 302, 400, 401, 404, 422]) t.equal(classifyStatus(s), 'rejected', String(s));
  t.equal(retryAfterMs('120', 0), 120_000);
  t.equal(retryAfterMs(new Date(60_000).toUTCString(), 0), 60_000);
  t.equal(retryAfterMs('soon', 0), null);
  t.equal(retryAfterMs('99999999', 0), 10 * 3600 * 1000, 'capped');

  const rx = await receiver(t, (req, res) => {
    if (req.url?.startsWith('/busy')) res.writeHead(429, { 'retry-after': '30' }).end();
    else if (req.url?.startsWith('/gone')) res.writeHead(410).end();
    else if (req.url?.startsWith('/reset')) req.socket.destroy();
    else res.writeHead(302, { location: 'http://169.254.169.254/' }).end();
  });
  const base = rx.url.replace('/hook?uid=u1', '');
  const send = (path: string) => attemptDelivery(guard, { url: base + path, webhookId: 'msg_x', timestampS: 1, body: '{}', secrets: [generateSecret()] }, { now });
  const busy = await send('/busy');
  t.match(busy, { outcome: 'retry', status: 429, retryAfterMs: 30_000 });
  t.match(await send('/gone'), { outcome: 'gone', status: 410 });
  t.match(await send('/reset'), { outcome: 'retry', status: null, error: 'connection' });
  t.match(await send('/moved'), { outcome: 'rejected', status: 302 }, 'a redirect is not followed');
  const strict = new DestinationGuard({ allowPrivate: false });
  const refused = await attemptDelivery(strict, { url: rx.url, webhookId: 'msg_y', timestampS: 1, body: '{}', secrets: [generateSecret()] }, { now });
  t.match(refused, { outcome: 'refused', status: null, error: 'refused:loopback' });
  t.equal(rx.seen.length, 4, 'the refused one never connected');
});

t.test('a slow receiver times out', async (t) => {
  const rx = await receiver(t, () => undefined);
  const r = await attemptDelivery(guard, { url: rx.url, webhookId: 'msg_s', timestampS: 1, body: '{}', secrets: [generateSecret()], timeoutMs: 150 }, { now });
  t.match(r, { outcome: 'retry', status: null, error: 'timeout' });
});

t.test('a kept-alive client reuses its connections for consecutive deliveries', async (t) => {
  const rx = await receiver(t, (_q, res) => res.end());
  const client = deliveryClient(guard);
  t.teardown(() => client.close());
  for (let i = 0; i < 10; i++) t.equal((await attemptDelivery(guard, { url: rx.url, webhookId: `msg_${i}`, timestampS: 1, body: '{}', secrets: [generateSecret()] }, { now, client })).outcome, 'delivered');
  // A connection is reused from the next turn of the event loop on (a receiver may close it right after an answer),
  // so back-to-back deliveries alternate between two.
  t.ok(new Set(rx.seen.map((s) => s.port)).size <= 2, 'at most two client ports for all ten');
});

t.test("an origin's pool is forgotten once its connections close, or when none could be opened", async (t) => {
  const rx = await receiver(t, (_q, res) => res.end());
  const client = new DeliveryClient(guard, { keepAliveMs: 50 });
  t.teardown(() => client.close());
  const send = (url: string) => attemptDelivery(guard, { url, webhookId: 'msg_p', timestampS: 1, body: '{}', secrets: [generateSecret()] }, { now, client });
  t.equal((await send(rx.url)).outcome, 'delivered');
  t.equal(client.origins, 1);
  await until(() => client.origins === 0);
  t.equal(client.origins, 0, 'idle: forgotten');
  t.match(await send('http://127.0.0.1:1/hook'), { outcome: 'retry', error: 'connection' });
  await until(() => client.origins === 0);
  t.equal(client.origins, 0, 'refused connection: forgotten');
  t.equal((await send(rx.url)).outcome, 'delivered', 'a later delivery opens a new one');
});

async function until(done: () => boolean, timeoutMs = 3000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!done() && Date.now() < end) await new Promise((r) => setTimeout(r, 10));
}
