// A faithful local fake of the Soniox realtime WebSocket API (provider_b): scripted transcripts, errors, refusals, drops.
//
// Not a mock of our client: it validates what the provider validates (key, start request, raw audio format, the
// 20 s idle watchdog) and speaks its wire format, so both the official SDK (test/fakes/soniox-server.test.ts)
// and engine/stt/provider-b/engine.ts are checked against the same server. Time for the idle watchdog comes from the
// injected clock/scheduler, so tests move it instead of sleeping. Connections take queued scripts in order.
//
// Standalone for the load bench (`npm run bench -- fleet --stt provider_b`):
//   node dist/test/fakes/soniox-server.js --port 0 [--key K]
// prints `{"port":N}`, answers a filler word every 2 s of audio, keeps counts instead of the audio, and serves
// `GET /stats` / `POST /stats/reset` as the provider_a fake does (deepgram-server.ts).
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { WebSocketServer } from 'ws';
import { systemClock, type Clock } from '../../engine/clock.js';
import { Scheduler, type TimerId } from '../../engine/scheduler.js';
import type { FakeStats } from './deepgram-server.js';
import { LagHistogram } from './lag-histogram.js';
import { FakeSonioxSession, type ReceivedSession, type SessionScript } from './soniox-session.js';
import { runStandalone } from './standalone.js';

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
  /**
   * Keep every connection's audio and answers in `sessions` (tests); false keeps no record at all, only the counts of
   * stats() (long bench runs). @defaultValue true
   */
  record?: boolean;
  /** What a connection meets when nothing is queued. @defaultValue { tokens: [] } */
  fallback?: SessionScript;
  /** @defaultValue 0 (any free port) */
  port?: number;
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
  /**
   * Connections opened and open now, audio bytes and frames, and how late frames arrived (each frame's arrival beyond
   * its stream's least-delayed one, ms), since the last resetStats() (the open count is always current).
   */
  stats(): FakeStats;
  resetStats(): void;
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
  const queue: SessionScript[] = [];
  const live = new Set<FakeSonioxSession>();
  const hung = new Set<Socket>();
  const sessions: ReceivedSession[] = [];
  const upgrades: FakeSoniox['upgrades'] = [];
  const record = opts.record ?? true;
  const lag = new LagHistogram();
  const totals = { streamsOpened: 0, bytes: 0, chunks: 0 };
  const ctx = {
    apiKey: opts.apiKey ?? FAKE_SONIOX_KEY,
    models: opts.models ?? ['stt-rt-v5', 'stt-rt-v4', 'stt-rt-v3', 'stt-rt-preview'],
    languages: LANGUAGES,
    now: () => clock.now(),
    record,
    // The injected clock in tests; else sub-millisecond real time, as the provider_a fake reads lateness.
    lagNow: opts.clock ? () => clock.now() : () => performance.now(),
    onAudio: (bytes: number, lagMs: number) => {
      totals.bytes += bytes;
      totals.chunks++;
      lag.add(lagMs);
    },
  };
  const stats = (): FakeStats => ({ streamsOpened: totals.streamsOpened, streamsOpen: live.size, bytes: totals.bytes, chunks: totals.chunks, lagMs: lag.summary() });
  const json = (res: http.ServerResponse, body: unknown): void => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(body));
  };

  const wss = new WebSocketServer({ noServer: true, perMessageDeflate: false });
  const server = http.createServer((req, res) => {
    const path = new URL(req.url ?? '/', 'http://x').pathname;
    if (path === '/stats' && req.method === 'GET') return json(res, stats());
    if (path === '/stats/reset' && req.method === 'POST') {
      // Answers the figures it resets, taken in the same turn, so a poller that resets every window loses no frame.
      const before = stats();
      fake.resetStats();
      return json(res, { ok: true, ...before });
    }
    res.writeHead(426, { 'content-type': 'text/plain' });
    res.end('Upgrade Required');
  });
  server.on('upgrade', (req: http.IncomingMessage, socket: Socket, head: Buffer) => {
    const protocol = req.headers['sec-websocket-protocol'];
    upgrades.push({ authorization: req.headers.authorization, protocol });
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
      totals.streamsOpened++;
      if (record) sessions.push(session.record);
      ws.on('close', () => live.delete(session));
    });
  });
  const sweep: TimerId = scheduler.every(1000, () => {
    for (const s of live) s.checkIdle(idleTimeoutMs);
  });

  await new Promise<void>((resolve) => server.listen(opts.port ?? 0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  const fake: FakeSoniox = {
    url: `ws://127.0.0.1:${port}${FAKE_SONIOX_PATH}`,
    sessions,
    upgrades,
    fallback: opts.fallback ?? { tokens: [] },
    script: (...scripts) => queue.push(...scripts),
    stats,
    resetStats() {
      totals.streamsOpened = 0;
      totals.bytes = 0;
      totals.chunks = 0;
      lag.reset();
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

// Standalone mode for the load bench.
runStandalone(import.meta.url, async (arg) => {
  const fake = await startFakeSoniox({ apiKey: arg('--key') ?? FAKE_SONIOX_KEY, port: Number(arg('--port') ?? 0), record: false, fallback: { fillerEveryS: 2 } });
  return { port: Number(new URL(fake.url).port), close: () => fake.close() };
});
