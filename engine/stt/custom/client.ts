// Client of an operator's custom transcription server (CUSTOM_STT_URL; docs/patterns/custom-stt.md): the app's audio goes
// out unchanged, segments come back. An inactivity close is not a failure (a muted wearable): the next audio reconnects.
import WebSocket from 'ws';
import type { Clock } from '../../clock.js';
import type { Logger } from '../../logger.js';
import type { Scheduler } from '../../scheduler.js';
import { InactivityTimer } from '../../runtime/inactivity-timer.js';
import { CUSTOM_STT, Outcome } from '../../protocol.js';
import type { RawSegment } from '../../audio/buffer-loop.js';
import { encodedDurationS } from '../../audio/encoded-duration.js';
import { parseCustomAnswer, timeSegments, type AnswerClock } from './answers.js';
import { SttEmitter } from '../stt-emitter.js';
import { SttOpenError, type SttFailure } from '../types.js';

export interface CustomSttOptions {
  /** ws:// or wss:// URL of the server (CUSTOM_STT_URL); query parameters it already carries are kept. */
  url: string;
  /** The session's codec, sent as the `codec` query parameter; the bytes are never re-encoded. */
  codec: string;
  /** The session's input sample rate in Hz (`sample_rate`). */
  sampleRate: number;
  /** 1, or 2 when every message starts with a channel byte (`channels`). */
  channels: number;
  /** Language code or `multi` (`language`). */
  language: string;
  /** For logs only. */
  sessionId: string;
  clock: Clock;
  scheduler: Scheduler;
  logger: Logger;
  /** No frame in either direction for this long closes the connection, in milliseconds. @defaultValue 90000 (the protocol's limit) */
  inactivityTimeoutMs?: number;
  /** Longest wait for the handshake, in milliseconds. @defaultValue 10000 (10 s) */
  connectTimeoutMs?: number;
  /** Longest wait after CloseStream for the server's last answers and its close, in milliseconds. @defaultValue 10000 (10 s) */
  finishTimeoutMs?: number;
  /** Audio bytes waiting to go out (socket buffer, or a reconnect) before the stream fails with send_failed. @defaultValue 4194304 (4 MiB) */
  maxBufferedBytes?: number;
  /** Largest answer frame accepted, in bytes; a larger one ends the connection. @defaultValue 1048576 (1 MiB) */
  maxAnswerBytes?: number;
}

export interface CustomSttEvents {
  /** Segments with `sttProvider` 'custom', times in seconds of the session's audio. */
  segments(segments: RawSegment[]): void;
  /** The server cannot be used any more; emitted at most once, and nothing follows it. */
  failure(failure: SttFailure): void;
}

type State = 'connecting' | 'open' | 'idle' | 'finishing' | 'finished' | 'failed' | 'closed';

/** A server that closes within this much of the inactivity limit closed for inactivity (its clock and ours differ a little). */
const IDLE_CLOSE_TOLERANCE_MS = 5_000;

export class CustomSttClient extends SttEmitter<CustomSttEvents> {
  readonly provider = CUSTOM_STT.provider;
  /** Counters for tests, logs and metrics; never content. */
  readonly stats = { connections: 0, framesSent: 0, bytesSent: 0, answers: 0, segments: 0, invalidSegments: 0, rejectedAnswers: 0, ignoredAnswers: 0, idleCloses: 0 };
  readonly #o: CustomSttOptions & Required<Pick<CustomSttOptions, 'inactivityTimeoutMs' | 'connectTimeoutMs' | 'finishTimeoutMs' | 'maxBufferedBytes' | 'maxAnswerBytes'>>;
  #state: State = 'connecting';
  #ws: WebSocket | undefined;
  /** The handshake in flight; resolves false when it failed. */
  #connecting: Promise<boolean>;
  /** Audio written while (re)connecting, sent once the socket opens. */
  #pending: Uint8Array[] = [];
  #pendingBytes = 0;
  readonly #time: AnswerClock = { offsetS: 0, cursorS: 0, audioS: 0 };
  readonly #idle: InactivityTimer;
  #finishing: Promise<void> | undefined;
  #serverClosed: (() => void) | undefined;

  private constructor(opts: CustomSttOptions) {
    super();
    this.#o = { inactivityTimeoutMs: CUSTOM_STT.inactivityTimeoutMs, connectTimeoutMs: 10_000, finishTimeoutMs: 10_000, maxBufferedBytes: 4 * 1024 * 1024, maxAnswerBytes: 1024 * 1024, ...opts };
    this.#idle = new InactivityTimer({ clock: opts.clock, scheduler: opts.scheduler, timeoutMs: this.#o.inactivityTimeoutMs, onIdle: () => this.#closeIdle() });
    this.#connecting = this.#connect();
  }

  /** Connects; rejects with an SttOpenError (`initialization_failed`) when the server cannot be reached in time. */
  static async open(opts: CustomSttOptions): Promise<CustomSttClient> {
    const client = new CustomSttClient(opts);
    if (!(await client.#connecting)) {
      client.#state = 'closed';
      throw new SttOpenError({ outcome: Outcome.UPSTREAM_ERROR, retryable: true, reason: 'initialization_failed' });
    }
    return client;
  }

  /** Seconds of audio written so far (channel 1 of two-channel sessions), read from the encoded bytes. */
  get audioSeconds(): number {
    return this.#time.audioS;
  }

  /**
   * One binary message of the app, forwarded byte for byte; `bytes` is not kept after the call returns (ws masks it
   * into a frame of its own). Ignored after finish(), a failure or close().
   */
  writeEncoded(bytes: Uint8Array): void {
    const state = this.#state;
    if (state !== 'open' && state !== 'connecting' && state !== 'idle') return;
    const startS = this.#time.audioS;
    this.#time.audioS += encodedDurationS(this.#o.codec, this.#o.sampleRate, this.#o.channels, bytes);
    this.#idle.touch();
    if (state === 'open') {
      this.#send(bytes);
      return;
    }
    // A copy: the caller's buffer is only lent for this call.
    this.#pending.push(bytes.slice());
    this.#pendingBytes += bytes.byteLength;
    if (this.#pendingBytes > this.#o.maxBufferedBytes) return this.#fail('send_failed');
    if (state === 'idle') {
      this.#time.offsetS = startS;
      this.#connecting = this.#connect();
      void this.#connecting.then((ok) => ok || this.#fail('connection_lost'));
    }
  }

  /** Sends CloseStream and resolves once the server closed (its last answers emitted), or after finishTimeoutMs. */
  finish(): Promise<void> {
    this.#finishing ??= this.#finish();
    return this.#finishing;
  }

  /** Drops the connection at once; idempotent. */
  async close(): Promise<void> {
    if (this.#state === 'closed') return;
    this.#state = 'closed';
    this.#idle.stop();
    this.#pending = [];
    this.#pendingBytes = 0;
    this.#drop(1000, 'session closed');
    this.#serverClosed?.();
  }

  async #finish(): Promise<void> {
    if (this.#state === 'connecting') await this.#connecting;
    if (this.#state === 'idle') this.#state = 'finished';
    const ws = this.#ws;
    if (this.#state !== 'open' || !ws) return;
    this.#state = 'finishing';
    this.#idle.stop();
    ws.send(CUSTOM_STT.closeStreamText);
    await new Promise<void>((resolve) => {
      const timer = this.#o.scheduler.after(this.#o.finishTimeoutMs, () => {
        this.#o.logger.warn({ sessionId: this.#o.sessionId }, 'custom stt server did not close after CloseStream');
        resolve();
      });
      this.#serverClosed = () => {
        this.#o.scheduler.cancel(timer);
        resolve();
      };
    });
    this.#serverClosed = undefined;
    if (this.#state === 'finishing') this.#state = 'finished';
    this.#drop(1000, 'stream finished');
  }

  #connect(): Promise<boolean> {
    const o = this.#o;
    const url = new URL(o.url);
    url.searchParams.set('codec', o.codec);
    url.searchParams.set('sample_rate', String(o.sampleRate));
    url.searchParams.set('channels', String(o.channels));
    url.searchParams.set('language', o.language);
    this.#state = 'connecting';
    const ws = new WebSocket(url, { perMessageDeflate: false, maxPayload: o.maxAnswerBytes });
    this.#ws = ws;
    return new Promise<boolean>((resolve) => {
      let opened = false;
      const timer = o.scheduler.after(o.connectTimeoutMs, () => ws.terminate());
      ws.on('error', (err: Error & { code?: string }) => {
        o.logger.warn({ sessionId: o.sessionId, opened, err: { name: err.name, code: err.code } }, 'custom stt connection error');
      });
      ws.on('open', () => {
        o.scheduler.cancel(timer);
        opened = true;
        if (this.#ws !== ws || this.#state !== 'connecting') {
          ws.terminate();
          resolve(false);
          return;
        }
        this.#opened(ws);
        resolve(true);
      });
      ws.on('message', (data: Buffer, isBinary: boolean) => {
        if (this.#ws === ws) this.#onAnswer(data, isBinary);
      });
      ws.on('close', (code: number) => {
        o.scheduler.cancel(timer);
        if (!opened) {
          if (this.#ws === ws) this.#ws = undefined;
          resolve(false);
        } else if (this.#ws === ws) {
          this.#ws = undefined;
          this.#onServerClose(code);
        }
      });
    });
  }

  #opened(ws: WebSocket): void {
    this.#state = 'open';
    this.stats.connections++;
    this.#idle.touch();
    this.#o.logger.debug({ sessionId: this.#o.sessionId, connection: this.stats.connections }, 'custom stt connected');
    const pending = this.#pending;
    this.#pending = [];
    this.#pendingBytes = 0;
    for (const bytes of pending) if (this.#ws === ws) this.#send(bytes);
    this.#idle.start();
  }

  #send(bytes: Uint8Array): void {
    const ws = this.#ws!;
    if (ws.bufferedAmount + bytes.byteLength > this.#o.maxBufferedBytes) return this.#fail('send_failed');
    ws.send(bytes, { binary: true });
    this.stats.framesSent++;
    this.stats.bytesSent += bytes.byteLength;
  }

  #onAnswer(data: Buffer, isBinary: boolean): void {
    if (this.#state !== 'open' && this.#state !== 'finishing') return;
    this.#idle.touch();
    const answer = isBinary ? ({ kind: 'rejected', reason: 'binary' } as const) : parseCustomAnswer(data.toString('utf8'));
    switch (answer.kind) {
      case 'rejected':
        this.stats.rejectedAnswers++;
        this.#o.logger.debug({ sessionId: this.#o.sessionId, reason: answer.reason }, 'custom stt answer rejected');
        return;
      case 'ignored':
        this.stats.ignoredAnswers++;
        return;
      case 'results': {
        this.stats.answers++;
        if (answer.invalid > 0) {
          this.stats.invalidSegments += answer.invalid;
          this.#o.logger.debug({ sessionId: this.#o.sessionId, invalid: answer.invalid }, 'custom stt segments dropped');
        }
        const segments = timeSegments(answer.segments, this.#time);
        this.stats.segments += segments.length;
        this.emitSegments(segments);
      }
    }
  }

  #onServerClose(code: number): void {
    if (this.#state === 'finishing') {
      this.#serverClosed?.();
      return;
    }
    if (this.#state !== 'open') return;
    if (this.#idle.idleMs >= this.#o.inactivityTimeoutMs - IDLE_CLOSE_TOLERANCE_MS) {
      this.#wentIdle();
      return;
    }
    this.#o.logger.warn({ sessionId: this.#o.sessionId, code }, 'custom stt server closed mid-session');
    this.#fail('connection_lost');
  }

  /** Our side of the inactivity limit. */
  #closeIdle(): void {
    if (this.#state !== 'open') return;
    this.#drop(1000, 'inactivity');
    this.#wentIdle();
  }

  #wentIdle(): void {
    this.#state = 'idle';
    this.stats.idleCloses++;
    this.#idle.stop();
    this.#o.logger.debug({ sessionId: this.#o.sessionId }, 'custom stt connection closed for inactivity');
  }

  /** Detaches the current socket (its later events are ignored) and closes it: politely when open, else at once. */
  #drop(code: number, reason: string): void {
    const ws = this.#ws;
    this.#ws = undefined;
    if (!ws) return;
    if (ws.readyState === WebSocket.OPEN) ws.close(code, reason);
    else ws.terminate();
  }

  #fail(reason: 'connection_lost' | 'send_failed'): void {
    if (this.#state === 'failed' || this.#state === 'closed' || this.#state === 'finished') return;
    this.#state = 'failed';
    this.#idle.stop();
    this.#pending = [];
    this.#pendingBytes = 0;
    const ws = this.#ws;
    this.#ws = undefined;
    ws?.terminate();
    this.#serverClosed?.();
    this.#o.logger.warn({ sessionId: this.#o.sessionId, reason }, 'custom stt failed');
    this.emitFailure({ outcome: Outcome.UPSTREAM_ERROR, retryable: true, reason });
  }
}

/** Opens a client, or answers the failure to report (stt_failed) when the server cannot be reached. */
export async function openCustomStt(opts: CustomSttOptions): Promise<CustomSttClient | { failure: SttFailure }> {
  try {
    return await CustomSttClient.open(opts);
  } catch (err) {
    return { failure: err instanceof SttOpenError ? err.failure : { outcome: Outcome.UPSTREAM_ERROR, retryable: true, reason: 'initialization_failed' } };
  }
}
