// Webhook receivers for tests: a real node:http server on port 0 that verifies every delivery with the official
// Standard Webhooks package, counts attempts and answers as the test says; and the set-up of endpoints and apps.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Test } from 'tap';
import { Webhook } from 'standardwebhooks';
import type { TestService } from './service.js';
import { bearer } from './http.js';
import { webhookParts } from '../../engine/webhooks/parts.js';
import { ConversationStatus } from '../../engine/protocol.js';

export interface Received {
  headers: http.IncomingHttpHeaders;
  body: Buffer;
  query: URLSearchParams;
  path: string;
}

export type Answer = (req: http.IncomingMessage, res: http.ServerResponse, n: number) => void;

export interface Receiver {
  url: string;
  received: Received[];
  /** What the next requests get; 200 `{}` by default. */
  answer: Answer;
}

export async function receiver(t: Test, answer: Answer = (_q, res) => res.end('{}')): Promise<Receiver> {
  const rx: Receiver = { url: '', received: [], answer };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const u = new URL(req.url ?? '/', 'http://x');
      rx.received.push({ headers: req.headers, body: Buffer.concat(chunks), query: u.searchParams, path: u.pathname });
      rx.answer(req, res, rx.received.length);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => { server.closeAllConnections(); server.close(() => r()); }));
  rx.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
  return rx;
}

/** Parses the delivery after checking its signature with `secret` (throws when it does not verify). */
export function verified(r: Received, secret: string): any {
  return new Webhook(secret).verify(r.body.toString(), r.headers as Record<string, string>);
}

/** The owner's current signing secret. */
export async function secretOf(s: TestService, kind: 'user' | 'app', id: string): Promise<string> {
  return (await webhookParts(s.service.services).secrets.get(kind, id, s.clock.now())).secret;
}

export async function setUserHook(s: TestService, uid: string, url: string, type = 'memory_created'): Promise<void> {
  const res = await s.req(`/v1/users/developer/webhook/${type}`, { method: 'POST', headers: bearer(await s.token(uid)), body: { url } });
  if (res.status !== 200) throw new Error(`webhook not saved: ${res.status} ${res.text}`);
}

/** A public app of `owner` with a memory_creation webhook at `url`, installed by `uid`; answers its id. */
export async function installedApp(s: TestService, owner: string, uid: string, url: string): Promise<string> {
  const created = await s.req('/v1/apps', {
    method: 'POST',
    headers: bearer(await s.token(owner)),
    body: { name: 'Notes', description: 'Keeps notes', capabilities: ['external_integration'], private: false, external_integration: { triggers_on: 'memory_creation', webhook_url: url } },
  });
  if (created.status !== 200) throw new Error(`app not created: ${created.status} ${created.text}`);
  const id = created.json.id as string;
  const inst = await s.req(`/v1/apps/${id}/install`, { method: 'POST', headers: bearer(await s.token(uid)) });
  if (inst.status !== 200) throw new Error(`app not installed: ${inst.status} ${inst.text}`);
  return id;
}

export const LINES = [
  { text: 'I need to call the dentist tomorrow morning.', start: 0, end: 3.5, speaker: 'SPEAKER_00', speakerId: 0, isUser: true },
  { text: 'Remember to buy milk on the way home.', start: 4, end: 7, speaker: 'SPEAKER_01', speakerId: 1, isUser: false },
];

/** A recorded conversation of `uid`, ended as a session ends it: processing is queued, and completes with the built-in processor. */
export async function endedConversation(s: TestService, uid: string): Promise<string> {
  const { conversations, users, lifecycle } = s.service.services;
  const now = s.clock.now();
  await users.ensure(uid, now, true);
  const c = await conversations.create({ userId: uid, status: ConversationStatus.IN_PROGRESS, startedAt: new Date(now - 10_000).toISOString(), finishedAt: null, source: 'omi', language: 'en', segments: LINES, now });
  if ((await lifecycle.end(c.id, uid)) !== 'processing') throw new Error('the conversation did not go to processing');
  return c.id;
}
