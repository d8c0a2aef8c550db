// A webhook receiver for tests: a real node:http server on 127.0.0.1:0 that verifies every request's Standard
// Webhooks signature with its owner's secret (the `standardwebhooks` package for JSON; the same HMAC by hand for a
// binary body, which the package would re-encode as text), records it, and answers as the test says.
import http from 'node:http';
import { createHmac, timingSafeEqual } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import type { Test } from 'tap';
import { Webhook } from 'standardwebhooks';

export interface Received {
  readonly url: URL;
  readonly headers: http.IncomingHttpHeaders;
  readonly body: Buffer;
  /** The signature verified with the receiver's secret. */
  readonly verified: boolean;
}

export interface Answer {
  status: number;
  body?: string;
  headers?: Record<string, string>;
}

export interface Receiver {
  /** http://127.0.0.1:<port>/hook */
  readonly url: string;
  readonly received: Received[];
  /** The most requests that were open at once. */
  readonly maxOpen: number;
  /** The owner's secret (whsec_…), set once the test read it. */
  secret: string;
  /** How each request is answered; a promise holds the answer back (a slow endpoint). */
  answer: (r: Received) => Answer | Promise<Answer>;
}

/** Verifies `webhook-signature` over `id.timestamp.body` by hand: any one v1 signature made with `secret` passes. */
export function verifyRaw(secret: string, headers: http.IncomingHttpHeaders, body: Buffer): boolean {
  const key = Buffer.from(secret.replace(/^whsec_/, ''), 'base64');
  const expected = createHmac('sha256', key).update(`${String(headers['webhook-id'])}.${String(headers['webhook-timestamp'])}.`).update(body).digest();
  return String(headers['webhook-signature'] ?? '')
    .split(' ')
    .some((s) => {
      const sig = Buffer.from(s.replace(/^v1,/, ''), 'base64');
      return sig.length === expected.length && timingSafeEqual(sig, expected);
    });
}

export async function startReceiver(t: Test): Promise<Receiver> {
  let open = 0;
  const rx: { -readonly [K in keyof Receiver]: Receiver[K] } = {
    url: '',
    received: [],
    maxOpen: 0,
    secret: '',
    answer: () => ({ status: 200 }),
  };
  const server = http.createServer((req, res) => {
    open++;
    rx.maxOpen = Math.max(rx.maxOpen, open);
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      let verified: boolean;
      if (req.headers['content-type'] === 'application/json') {
        try {
          new Webhook(rx.secret).verify(body.toString('utf8'), req.headers as Record<string, string>);
          verified = true;
        } catch {
          verified = false;
        }
      } else {
        verified = verifyRaw(rx.secret, req.headers, body);
      }
      const r: Received = { url: new URL(req.url ?? '/', 'http://x'), headers: req.headers, body, verified };
      rx.received.push(r);
      void Promise.resolve(rx.answer(r)).then((a) => {
        open--;
        res.writeHead(a.status, { 'content-type': 'application/json', ...a.headers });
        res.end(a.body ?? '');
      });
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => {
    server.closeAllConnections();
    return new Promise<void>((r) => server.close(() => r()));
  });
  rx.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
  return rx;
}

/** A gate a slow receiver waits on: `open()` lets every waiting answer go. */
export function gate(): { wait: Promise<void>; open: () => void } {
  let open!: () => void;
  const wait = new Promise<void>((r) => (open = r));
  return { wait, open };
}
