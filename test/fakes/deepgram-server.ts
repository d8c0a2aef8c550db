// A local fake of Deepgram's live `/v1/listen` WebSocket (uWebSockets.js): validates what Deepgram validates, answers scripts.
//
// In-process for tests (`startFakeDeepgram()`), or standalone for the load bench:
//   node dist/test/fakes/deepgram-server.js --port 0 [--key K] [--host 127.0.0.1]
// prints `{"port":N}`, answers filler Results every 2 s of audio, and serves `GET /stats` / `POST /stats/reset`.
// Upgrade checks, in order: `Authorization: Token <key>` (or the browser form, subprotocols `token, <key>`) else 401;
// the query (deepgram-query.ts) else 400; then the next scripted step (accept, reject with a status, or hold).
// Time for the idle rule comes from the injected clock; `sweep()` applies it (a real interval also does, every second).
import uWS from 'uWebSockets.js';
import { systemClock, type Clock } from '../../engine/clock.js';
import { credential, refusalOf } from './deepgram-handshake.js';
import { checkListenQuery } from './deepgram-query.js';
import { FakeStream, type StreamBehaviour, type StreamContext } from './deepgram-stream.js';
import { LagHistogram, type LagSummary } from './lag-histogram.js';
import { runStandalone } from './standalone.js';
import { attachPrerecorded, type FakePrerecorded, type PrerecordedStep } from './deepgram-prerecorded.js';

export { FakeStream, type ScriptedResult, type ScriptedWord, type StreamBehaviour } from './deepgram-stream.js';
export type { FakePrerecorded, PrerecordedRequest, PrerecordedStep } from './deepgram-prerecorded.js';

/** What the next connection attempt (that passed auth and query checks) meets. */
export type ConnectStep =
  | ({ kind: 'accept'; upgradeDelayMs?: number } & StreamBehaviour)
  | { kind: 'reject'; status: number; retryAfter?: string; errCode?: string; errMsg?: string }
  /** Never answers the upgrade (a connect timeout on the client). */
  | { kind: 'hold' };

export interface UpgradeAttempt {
  headers: Record<string, string>;
  query: URLSearchParams;
  status: number;
}

export interface FakeStats {
  streamsOpened: number;
  streamsOpen: number;
  bytes: number;
  chunks: number;
  lagMs: LagSummary;
}

export interface FakeDeepgramOptions {
  /** Accepted key; null accepts any non-empty `Token` credential. @defaultValue 'test-key' */
  apiKey?: string | null;
  clock?: Clock;
  /** Deepgram closes a stream that got no audio or text for 10 s. @defaultValue 10000 */
  idleTimeoutMs?: number;
  /** Real interval that applies the idle rule; 0 leaves it to sweep(). @defaultValue 1000 */
  sweepEveryMs?: number;
  /** Keep closed streams in `streams` (tests) or forget them (long bench runs). @defaultValue true */
  keepClosed?: boolean;
  /** What a connection meets when nothing is scripted. @defaultValue { kind: 'accept' } */
  fallback?: ConnectStep;
  /** Keep a copy of every stream's audio in `FakeStream.audio` (tests that check the bytes). @defaultValue false */
  recordAudio?: boolean;
  /** What a pre-recorded request meets when nothing is scripted. @defaultValue an empty transcript */
  prerecordedFallback?: PrerecordedStep;
  host?: string;
  port?: number;
}

export interface FakeDeepgram {
  /** `ws://host:port/v1/listen`. */
  readonly url: string;
  readonly port: number;
  readonly streams: FakeStream[];
  readonly attempts: UpgradeAttempt[];
  /** The pre-recorded API (`POST /v1/listen`) on the same port. */
  readonly prerecorded: FakePrerecorded;
  fallback: ConnectStep;
  /** Queues steps for the next connection attempts. */
  script(...steps: ConnectStep[]): void;
  /** Closes every open stream idle for longer than the idle window, by the injected clock. */
  sweep(): void;
  stats(): FakeStats;
  resetStats(): void;
  close(): Promise<void>;
}

interface UserData {
  stream: FakeStream;
}

export async function startFakeDeepgram(opts: FakeDeepgramOptions = {}): Promise<FakeDeepgram> {
  const apiKey = opts.apiKey === undefined ? 'test-key' : opts.apiKey;
  const clock = opts.clock ?? systemClock;
  const idleTimeoutMs = opts.idleTimeoutMs ?? 10_000;
  const keepClosed = opts.keepClosed ?? true;
  const queue: ConnectStep[] = [];
  const streams: FakeStream[] = [];
  const open = new Set<FakeStream>();
  const attempts: UpgradeAttempt[] = [];
  const held = new Set<uWS.HttpResponse>();
  const lag = new LagHistogram();
  const totals = { bytes: 0, chunks: 0 };
  let streamsOpened = 0;
  let nextId = 1;
  const ctx: StreamContext = { clock, lag, totals };

  function reject(res: uWS.HttpResponse, attempt: UpgradeAttempt, status: number, extra: { retryAfter?: string; errCode?: string; errMsg?: string } = {}): void {
    attempt.status = status;
    attempts.push(attempt);
    const refusal = refusalOf(status, extra);
    res.cork(() => {
      res.writeStatus(refusal.statusLine);
      for (const [k, v] of Object.entries(refusal.headers)) res.writeHeader(k, v);
      res.end(refusal.body);
    });
  }

  const app = uWS.App();
  app.ws<UserData>('/v1/listen', {
    compression: uWS.DISABLED,
    maxPayloadLength: 1024 * 1024,
    maxBackpressure: 1024 * 1024,
    idleTimeout: 0,
    sendPingsAutomatically: false,
    upgrade: (res, req, context) => {
      const headers: Record<string, string> = {};
      req.forEach((k, v) => (headers[k] = v));
      const query = new URLSearchParams(req.getQuery() ?? '');
      const wsKey = headers['sec-websocket-key'] ?? '';
      const extensions = headers['sec-websocket-extensions'] ?? '';
      let aborted = false;
      res.onAborted(() => {
        aborted = true;
        held.delete(res);
      });
      const attempt: UpgradeAttempt = { headers, query, status: 0 };
      const cred = credential(headers);
      if (cred.key === undefined || (apiKey !== null && cred.key !== apiKey)) return reject(res, attempt, 401);
      const checked = checkListenQuery(query);
      if (!checked.ok) return reject(res, attempt, 400, { errMsg: checked.message });
      const step = queue.shift() ?? fake.fallback;
      if (step.kind === 'reject') return reject(res, attempt, step.status, step);
      if (step.kind === 'hold') {
        held.add(res);
        attempts.push(attempt);
        return;
      }
      const upgrade = () => {
        if (aborted) return;
        attempt.status = 101;
        attempts.push(attempt);
        const stream = new FakeStream(nextId++, headers, query, checked.options, step, ctx);
        res.cork(() => res.upgrade<UserData>({ stream }, wsKey, cred.protocol, extensions, context));
      };
      if (step.upgradeDelayMs) {
        held.add(res);
        setTimeout(() => {
          held.delete(res);
          upgrade();
        }, step.upgradeDelayMs);
      } else upgrade();
    },
    open: (ws) => {
      const { stream } = ws.getUserData();
      stream.ws = ws as uWS.WebSocket<unknown>;
      stream.lastActivityAt = clock.now();
      streams.push(stream);
      open.add(stream);
      streamsOpened++;
    },
    message: (ws, message, isBinary) => {
      const { stream } = ws.getUserData();
      if (isBinary) {
        if (opts.recordAudio) stream.audio.push(Buffer.from(message.slice(0)));
        stream.onAudio(message.byteLength);
      }
      else stream.onText(Buffer.from(message).toString('utf8'));
    },
    close: (ws, code) => {
      const { stream } = ws.getUserData();
      open.delete(stream);
      stream.onClosed(code);
      if (!keepClosed) streams.splice(streams.indexOf(stream), 1);
    },
  });
  app.get('/stats', (res) => {
    res.writeHeader('content-type', 'application/json').end(JSON.stringify(fake.stats()));
  });
  app.post('/stats/reset', (res) => {
    res.onAborted(() => undefined);
    // Answers the figures it resets (taken in the same turn), so a poller that resets every window loses no chunk.
    const before = fake.stats();
    fake.resetStats();
    res.writeHeader('content-type', 'application/json').end(JSON.stringify({ ok: true, ...before }));
  });
  const prerecorded = attachPrerecorded(app, apiKey, keepClosed);
  if (opts.prerecordedFallback) prerecorded.fallback = opts.prerecordedFallback;
  app.any('/*', (res) => {
    res.writeStatus('404 Not Found').writeHeader('content-type', 'application/json').end(JSON.stringify({ err_code: 'NOT_FOUND', err_msg: 'Not found' }));
  });

  const host = opts.host ?? '127.0.0.1';
  const listenSocket = await new Promise<uWS.us_listen_socket>((resolve, reject) => {
    app.listen(host, opts.port ?? 0, (token) => (token ? resolve(token) : reject(new Error(`fake deepgram could not listen on ${host}`))));
  });
  const port = uWS.us_socket_local_port(listenSocket);
  const sweepEveryMs = opts.sweepEveryMs ?? 1000;
  const sweeper = sweepEveryMs > 0 ? setInterval(() => fake.sweep(), sweepEveryMs) : undefined;
  sweeper?.unref();

  const fake: FakeDeepgram = {
    url: `ws://${host}:${port}/v1/listen`,
    port,
    streams,
    attempts,
    prerecorded,
    fallback: opts.fallback ?? { kind: 'accept' },
    script: (...steps) => void queue.push(...steps),
    sweep() {
      const now = clock.now();
      for (const s of [...open]) if (now - s.lastActivityAt > idleTimeoutMs) s.idleClose();
    },
    stats: () => ({ streamsOpened, streamsOpen: open.size, bytes: totals.bytes, chunks: totals.chunks, lagMs: lag.summary() }),
    resetStats() {
      streamsOpened = 0;
      totals.bytes = 0;
      totals.chunks = 0;
      lag.reset();
    },
    async close() {
      clearInterval(sweeper);
      uWS.us_listen_socket_close(listenSocket);
      prerecorded.close();
      for (const res of held) res.close();
      held.clear();
      for (const s of [...open]) s.drop();
    },
  };
  return fake;
}

// Standalone mode for the load bench.
runStandalone(import.meta.url, (arg) =>
  startFakeDeepgram({
    apiKey: arg('--key') ?? null,
    host: arg('--host') ?? '127.0.0.1',
    port: Number(arg('--port') ?? 0),
    keepClosed: false,
    fallback: { kind: 'accept', autoEveryS: 2 },
    // The voice bench's answer: a pre-recorded request gets a sentence whatever it sent.
    prerecordedFallback: { kind: 'answer', transcript: 'A filler sentence from the fake provider.' },
  }),
);
