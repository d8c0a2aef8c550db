// A faithful local fake of the Soniox realtime WebSocket API (provider_b): scripted transcripts, errors, refusals, drops.
//
// Not a mock of our client: it validates what the provider validates (key, start request, raw audio format, the
// 20 s idle watchdog) and speaks its wire format, so both the official SDK (test/fakes/soniox-server.test.ts)
// and engine/stt/provider-b.ts are checked against the same server. Time for the idle watchdog comes from the
// injected clock/scheduler, so tests move it instead of sleeping. Connections take queued scripts in order.
import { EventEmitter } from 'node:events';
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { WebSocketServer } from 'ws';
import { systemClock, type Clock } from '../../engine/clock.js';
import { Scheduler, type TimerId } from '../../engine/scheduler.js';
import { FakeSonioxSession, type ReceivedSession, type SessionScript } from './soniox-session.js';

export type { ReceivedSession, ScriptedToken, SessionScript } from './soniox-session.js';

export const FAKE_SONIOX_KEY = 'soniox-test-key';
export const FAKE_SONIOX_PATH = '/transcribe-websocket';

/**
 * The provider's language list, kept here on purpose rather than imported from the client: the fake is the
 * provider's side, so a wrong list in the client shows up as a 400, not as agreement.
 */
const LANGUAGES = new Set(
  ('af sq ar az eu be bn bs bg ca zh hr cs da nl en et fi fr gl de el gu he hi hu id it ja kn kk ko lv lt mk ms ml mr ' +
    'no fa pl pt pa ro ru sr sk sl es sw sv tl ta te th tr uk ur vi cy').split(' '),
);

export interface FakeSonioxOptions {
  /** The one valid key. @defaultValue FAKE_SONIOX_KEY */
  apiKey?: string;
  /** Clock of the idle watchdog. @defaultValue systemClock */
  clock?: Clock;
  /** Scheduler that runs the idle watchdog (tests pass theirs and tick it). @defaultValue an own one on `clock` */
  scheduler?: Scheduler;
  /** Silence (no audio, no keepalive) after which a stream is closed, in milliseconds. @defaultValue 20000 */
  idleTimeoutMs?: number;
  /** Models the start request may name. @defaultValue stt-rt-v5, stt-rt-v4, stt-rt-v3, stt-rt-preview */
  models?: readonly string[];
}

export interface FakeSoniox {
  /** ws:// URL of the transcribe endpoint. */
  readonly url: string;
  /** Accepted WebSocket connections, in order. */
  readonly sessions: ReceivedSession[];
  /** Upgrade requests seen, refused or not. */
  readonly upgrades: { authorization: string | undefined; protocol: string | undefined }[];
  /** Queues scripts for the next connections; once the queue is empty, `fallback` is used. */
  script(...scripts: SessionScript[]): void;
  fallback: SessionScript;
  /** Resolves once `predicate` holds (checked after every frame and answer); rejects after `timeoutMs` of real time. */
  waitFor(predicate: () => boolean, timeoutMs?: number): Promise<void>;
  close(): Promise<void>;
}

const STATUS_TEXT: Record<number, string> = { 401: 'Unauthorized', 402: 'Payment Required', 429: 'Too Many Requests', 500: 'Internal Server Error', 503: 'Service Unavailable' };

function refuse(socket: Socket, status: number, retryAfterS?: number): void {
  const body = JSON.stringify({ error_code: status, error_type: status === 429 ? 'rate_limit_exceeded' : 'refused', error_message: 'Refused by the fake server.' });
  const headers = [
    `HTTP/1.1 ${status} ${STATUS_TEXT[status] ?? 'Error'}`,
    'Content-Type: application/json',
    `Content-Length: ${Buffer.byteLength(body)}`,
    ...(retryAfterS === undefined ? [] : [`Retry-After: ${retryAfterS}`]),
    'Connection: close',
  ];
  socket.end(`${headers.join('\r\n')}\r\n\r\n${body}`);
}

export async function startFakeSoniox(opts: FakeSonioxOptions = {}): Promise<FakeSoniox> {
  const clock = opts.clock ?? systemClock;
  const ownScheduler = opts.scheduler === undefined ? new Scheduler({ clock, resolutionMs: 200 }) : undefined;
  const scheduler = opts.scheduler ?? ownScheduler!;
  const idleTimeoutMs = opts.idleTimeoutMs ?? 20000;
  const events = new EventEmitter();
  events.setMaxListeners(0);
  const queue: SessionScript[] = [];
  const live = new Set<FakeSonioxSession>();
  const hung = new Set<Socket>();
  const sessions: ReceivedSession[] = [];
  const upgrades: FakeSoniox['upgrades'] = [];
  const ctx = {
    apiKey: opts.apiKey ?? FAKE_SONIOX_KEY,
    models: opts.models ?? ['stt-rt-v5', 'stt-rt-v4', 'stt-rt-v3', 'stt-rt-preview'],
    languages: LANGUAGES,
    now: () => clock.now(),
    changed: () => events.emit('changed'),
  };

  const wss = new WebSocketServer({ noServer: true, perMessageDeflate: false });
  const server = http.createServer((_req, res) => {
    res.writeHead(426, { 'content-type': 'text/plain' });
    res.end('Upgrade Required');
  });
  server.on('upgrade', (req: http.IncomingMessage, socket: Socket, head: Buffer) => {
    const protocol = req.headers['sec-websocket-protocol'];
    upgrades.push({ authorization: req.headers.authorization, protocol });
    ctx.changed();
    if (new URL(req.url ?? '/', 'http://x').pathname !== FAKE_SONIOX_PATH) return refuse(socket, 404);
    const script = queue.shift() ?? fake.fallback;
    if (script.refuse) return refuse(socket, script.refuse.status, script.refuse.retryAfterS);
    if (script.hang) {
      hung.add(socket);
      socket.on('close', () => hung.delete(socket));
      return;
    }
    // Browsers send the key as the second entry of the protocols list: ['soniox-api-key', key].
    const offered = protocol?.split(',').map((p) => p.trim()) ?? [];
    const protocolKey = offered[0] === 'soniox-api-key' ? offered[1] : undefined;
    wss.handleUpgrade(req, socket, head, (ws) => {
      const session = new FakeSonioxSession(ws, script, ctx, req.headers.authorization, protocolKey);
      live.add(session);
      sessions.push(session.record);
      ws.on('close', () => live.delete(session));
      ctx.changed();
    });
  });
  const sweep: TimerId = scheduler.every(1000, () => {
    for (const s of live) s.checkIdle(idleTimeoutMs);
  });

  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  const fake: FakeSoniox = {
    url: `ws://127.0.0.1:${port}${FAKE_SONIOX_PATH}`,
    sessions,
    upgrades,
    fallback: { tokens: [] },
    script: (...scripts) => queue.push(...scripts),
    waitFor(predicate, timeoutMs = 5000) {
      if (predicate()) return Promise.resolve();
      return new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => {
          events.off('changed', check);
          reject(new Error('fake soniox: condition not reached in time'));
        }, timeoutMs);
        function check(): void {
          if (!predicate()) return;
          clearTimeout(timer);
          events.off('changed', check);
          resolve();
        }
        events.on('changed', check);
      });
    },
    async close() {
      scheduler.cancel(sweep);
      ownScheduler?.close();
      for (const ws of wss.clients) ws.terminate();
      for (const socket of hung) socket.destroy();
      wss.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  return fake;
}
