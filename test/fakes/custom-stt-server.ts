// An external custom transcription server on 127.0.0.1:0 for tests: records each connection's query, audio and text
// frames; answers as scripted (objects, raw arrays, foreign types, broken JSON, binary), or holds, closes or vanishes.
import type { AddressInfo } from 'node:net';
import { WebSocketServer, type WebSocket } from 'ws';

/** One frame the server sends: JSON text, text exactly as given, or a binary frame. */
export type Answer = { json: unknown } | { raw: string } | { binary: Uint8Array };

export interface ConnectionScript {
  /** Answers sent right after the connection's nth audio frame (0-based). */
  afterFrame?: Record<number, Answer[]>;
  /**
   * After `{"type":"CloseStream"}`: these answers, then close with 1000 ('close', the default), stay silent and open
   * ('hold': a slow server), or drop the TCP connection ('terminate').
   */
  onCloseStream?: { answers?: Answer[]; then?: 'close' | 'hold' | 'terminate' };
}

export interface FakeConnection {
  /** Query parameters of the upgrade request. */
  readonly query: URLSearchParams;
  /** Binary frames in arrival order, as received. */
  readonly frames: Buffer[];
  /** Text frames in arrival order. */
  readonly texts: string[];
  /** Resolves when CloseStream arrives, with the number of audio frames received before it. */
  readonly closeStream: Promise<number>;
  /** Resolves with the close code once the connection is gone, whoever ended it. */
  readonly closed: Promise<number>;
  /** Resolves once at least `n` audio frames arrived. */
  waitForFrames(n: number): Promise<void>;
  send(answer: Answer): void;
  close(code?: number, reason?: string): void;
  /** Drops the connection without a close frame (a server that crashed). */
  terminate(): void;
}

export interface FakeCustomStt {
  /** ws:// URL to configure as CUSTOM_STT_URL (it carries a query parameter of its own, which must survive). */
  readonly url: string;
  readonly connections: FakeConnection[];
  /** Resolves with the next connection no earlier call returned. */
  nextConnection(): Promise<FakeConnection>;
  /** Script for connections accepted from now on. */
  script: ConnectionScript;
  /** When true, upgrades are refused with HTTP 503. */
  refuse: boolean;
  close(): Promise<void>;
}

const CLOSE_STREAM = 'CloseStream';

function encode(a: Answer): { data: string | Uint8Array; binary: boolean } {
  if ('binary' in a) return { data: a.binary, binary: true };
  return { data: 'raw' in a ? a.raw : JSON.stringify(a.json), binary: false };
}

export async function startFakeCustomStt(): Promise<FakeCustomStt> {
  const connections: FakeConnection[] = [];
  const waiting: ((c: FakeConnection) => void)[] = [];
  let claimed = 0;
  const wss = new WebSocketServer({
    host: '127.0.0.1',
    port: 0,
    path: '/v1/stream',
    verifyClient: (_info, cb) => (fake.refuse ? cb(false, 503, 'Service Unavailable') : cb(true)),
  });
  await new Promise<void>((resolve) => wss.once('listening', resolve));

  wss.on('connection', (ws: WebSocket, req) => {
    const script = fake.script;
    const frames: Buffer[] = [];
    const texts: string[] = [];
    const frameWaiters: { n: number; resolve: () => void }[] = [];
    let sawCloseStream!: (framesBefore: number) => void;
    const closeStream = new Promise<number>((r) => (sawCloseStream = r));
    const closed = new Promise<number>((r) => ws.once('close', (code: number) => r(code)));
    const send = (a: Answer): void => {
      const { data, binary } = encode(a);
      ws.send(data, { binary });
    };
    ws.on('message', (data: Buffer, isBinary: boolean) => {
      if (isBinary) {
        frames.push(Buffer.from(data));
        for (const a of script.afterFrame?.[frames.length - 1] ?? []) send(a);
        for (const w of frameWaiters.filter((x) => frames.length >= x.n)) w.resolve();
        return;
      }
      const text = data.toString('utf8');
      texts.push(text);
      let type: unknown;
      try {
        type = (JSON.parse(text) as { type?: unknown }).type;
      } catch {
        return;
      }
      if (type !== CLOSE_STREAM) return;
      sawCloseStream(frames.length);
      const after = script.onCloseStream ?? {};
      for (const a of after.answers ?? []) send(a);
      if ((after.then ?? 'close') === 'close') ws.close(1000, 'stream ended');
      else if (after.then === 'terminate') ws.terminate();
    });
    ws.on('error', () => undefined);
    const conn: FakeConnection = {
      query: new URL(req.url ?? '/', 'ws://fake').searchParams,
      frames,
      texts,
      closeStream,
      closed,
      waitForFrames: (n) => (frames.length >= n ? Promise.resolve() : new Promise((resolve) => frameWaiters.push({ n, resolve }))),
      send,
      close: (code = 1000, reason = '') => ws.close(code, reason),
      terminate: () => ws.terminate(),
    };
    connections.push(conn);
    const next = waiting.shift();
    if (next) {
      claimed++;
      next(conn);
    }
  });

  const fake: FakeCustomStt = {
    url: `ws://127.0.0.1:${(wss.address() as AddressInfo).port}/v1/stream?tenant=t1`,
    connections,
    nextConnection() {
      const ready = connections[claimed];
      if (ready) {
        claimed++;
        return Promise.resolve(ready);
      }
      return new Promise((resolve) => waiting.push(resolve));
    },
    script: {},
    refuse: false,
    async close() {
      for (const c of wss.clients) c.terminate();
      await new Promise<void>((resolve) => wss.close(() => resolve()));
    },
  };
  return fake;
}
