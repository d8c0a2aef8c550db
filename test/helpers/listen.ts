// A /v4/listen client for tests: collects every frame, waits for matching ones, reports the close code and reason.
import WebSocket from 'ws';
import type { TestService } from './service.js';
import { until } from './until.js';
import type { SessionActor } from '../../engine/listen/session-actor.js';

export interface Closed {
  code: number;
  reason: string;
}

export class ListenClient {
  readonly frames: string[] = [];
  readonly closed: Promise<Closed>;
  #cursor = 0;
  #wake: (() => void) | undefined;

  constructor(readonly ws: WebSocket) {
    ws.on('message', (data, isBinary) => {
      this.frames.push(isBinary ? `<binary ${(data as Buffer).length}>` : String(data));
      this.#wake?.();
    });
    this.closed = new Promise((resolve) => ws.on('close', (code, reason) => resolve({ code, reason: reason.toString() })));
  }

  /** The next frame (after those already taken) matching `pred`; earlier non-matching frames are skipped. */
  async next(pred: (frame: string) => boolean = () => true, timeoutMs = 30_000): Promise<string> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      while (this.#cursor < this.frames.length) {
        const f = this.frames[this.#cursor++]!;
        if (pred(f)) return f;
      }
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`no matching frame within ${timeoutMs} ms; got ${JSON.stringify(this.frames.slice(-5))}`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.#wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
    }
  }

  /** The next JSON frame whose parsed value satisfies `pred`. */
  async json(pred: (msg: any) => boolean, timeoutMs?: number): Promise<any> {
    const f = await this.next((x) => {
      try {
        return pred(JSON.parse(x));
      } catch {
        return false;
      }
    }, timeoutMs);
    return JSON.parse(f);
  }

  /** Waits for service_status ready. */
  ready(): Promise<any> {
    // The local engine starts its speech thread on first use: slow on a loaded machine.
    return this.json((m) => m.type === 'service_status' && m.status === 'ready', 30_000);
  }

  close(): void {
    this.ws.close(1000);
  }
}

export type ConnectResult = { client: ListenClient; status?: undefined } | { client?: undefined; status: number; body: string };

/** Opens /v4/listen; `token` undefined signs one for query.uid, null sends no Authorization header. */
export async function connect(ts: TestService, query: Record<string, string>, token?: string | null): Promise<ConnectResult> {
  const qs = new URLSearchParams(query).toString();
  const bearer = token === undefined ? await ts.token(query.uid ?? 'nobody') : token;
  const ws = new WebSocket(`ws://127.0.0.1:${ts.service.port}/v4/listen?${qs}`, bearer ? { headers: { authorization: `Bearer ${bearer}` } } : {});
  const client = new ListenClient(ws);
  return new Promise((resolve, reject) => {
    ws.on('open', () => resolve({ client }));
    ws.on('unexpected-response', (_req, res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString() }));
      res.on('error', reject);
    });
    ws.on('error', (err) => reject(err));
  });
}

/** Connects and fails the test setup when the upgrade is refused. */
export async function open(ts: TestService, query: Record<string, string>, token?: string): Promise<ListenClient> {
  const r = await connect(ts, query, token);
  if (!r.client) throw new Error(`upgrade refused: ${r.status} ${r.body}`);
  return r.client;
}

/** Moves the service's clock and runs the timers that became due. */
export async function advance(ts: TestService, ms: number): Promise<void> {
  ts.clock.advance(ms);
  await ts.service.scheduler.tick();
}

/** Sends a text frame and waits until `actor` has taken it (it must reach the actor before the clock moves). */
export async function sendText(c: ListenClient, actor: SessionActor, frame: string): Promise<void> {
  const before = actor.stats.textMessages;
  c.ws.send(frame);
  await until(() => actor.stats.textMessages > before, { what: 'frame received' });
}

/** Sends a text frame, waits until `actor` has taken it, runs one 600 ms step and returns the segment array it sent. */
export async function sendAndStep(ts: TestService, c: ListenClient, actor: SessionActor, frame: string): Promise<any[]> {
  await sendText(c, actor, frame);
  await advance(ts, 600);
  return c.json((m) => Array.isArray(m));
}

/** A suggested_transcript frame of one user line of 1 s at `start`. */
export const suggestedLine = (text: string, start: number): string =>
  JSON.stringify({ type: 'suggested_transcript', stt_provider: 'app', segments: [{ text, speaker: 'SPEAKER_00', speaker_id: 0, is_user: true, person_id: null, start, end: start + 1 }] });
