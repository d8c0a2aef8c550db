// One provider_a session: PCM out on a Deepgram live socket, final Results in as segments, KeepAlive over pauses, and
// how far the results have covered the audio.
import type { ProviderSocket } from '../../codec/uplink.js';
import type { Logger } from '../../logger.js';
import type { Scheduler, TimerId } from '../../scheduler.js';
import { SAMPLE_RATE_HZ, segmentsOf, streamFailure, type DgResults } from './protocol.js';
import { SttEmitter } from '../stt-emitter.js';
import { StallWatch } from '../remote/stall.js';
import type { SttFailure, SttStream } from '../types.js';
import { Outcome } from '../../protocol.js';

export interface ProviderAStreamOptions {
  sessionId: string;
  scheduler: Scheduler;
  logger: Logger;
  keepAliveMs: number;
  finalizeTimeoutMs: number;
  closeTimeoutMs: number;
  /** Keep-alive periods with audio sent and no message back, in a row, after which the stream fails as stalled. */
  stallPeriods: number;
  onClosed: () => void;
}

interface Waiter {
  target: number;
  resolve: () => void;
  timer: TimerId;
}

/**
 * The session's codec shard sends the decoded audio on the socket itself, in messages of the stream's send plan; this
 * side learns what went out from taken(). One repeating scheduler entry per stream sends KeepAlive when no audio went
 * out during the last period, so a long pause outlives Deepgram's 10 s idle rule. How far final results (Deepgram's
 * `start + duration`) have covered the audio is told by acknowledgedSamples(); the audio itself is kept, encoded, by
 * the session (engine/audio/encoded-tail.ts). A failure is reported once.
 */
export class ProviderAStream extends SttEmitter implements SttStream {
  readonly provider = 'provider_a';
  readonly #ws: ProviderSocket;
  readonly #o: ProviderAStreamOptions;
  #state: 'open' | 'closing' | 'failed' | 'closed' = 'open';
  /** Samples handed to the socket, and samples covered by final results. */
  #sent = 0;
  #acked = 0;
  #sentSinceTick = false;
  /** Keep-alive checks in a row with audio out and no message back. */
  readonly #stall: StallWatch;
  readonly #keepAlive: TimerId;
  #waiters: Waiter[] = [];
  #socketClosed: (() => void) | undefined;
  #closing: Promise<void> | undefined;

  constructor(ws: ProviderSocket, o: ProviderAStreamOptions) {
    super();
    this.#ws = ws;
    this.#o = o;
    this.#stall = new StallWatch(o.stallPeriods);
    ws.listen({
      text: (text) => this.#onText(text),
      close: (code, reason) => this.#onClose(code, reason),
      stuck: () => this.#fail({ outcome: Outcome.UPSTREAM_ERROR, retryable: true, reason: 'send_failed' }),
    });
    this.#keepAlive = o.scheduler.every(o.keepAliveMs, () => this.#tick());
  }

  /**
   * PCM that reached this thread (the decoders' tail, or a job's audio): one message, after what the shard sent itself
   * (copied, the caller keeps its array). Ignored once the stream closed or failed.
   */
  write(pcm: Int16Array): void {
    if (this.#state !== 'open' || pcm.length === 0) return;
    this.#ws.sendAudio(pcm);
    this.taken(pcm.length);
  }

  /** PCM the session's codec shard sent on this stream's socket. */
  taken(samples: number): void {
    if (this.#state !== 'open') return;
    this.#sent += samples;
    this.#sentSinceTick = true;
    this.#stall.sent();
  }

  /** Samples covered by final results (at most those sent): the session keeps the audio after them. */
  acknowledgedSamples(): number {
    return this.#acked;
  }

  /**
   * Sends Finalize, after a rest the shard still holds; resolves once Deepgram answered for it (from_finalize) or
   * after finalizeTimeoutMs.
   */
  finalize(): Promise<void> {
    if (this.#state !== 'open') return Promise.resolve();
    const target = this.#sent;
    if (this.#acked >= target) return Promise.resolve();
    this.#ws.sendText('{"type":"Finalize"}', true);
    return new Promise<void>((resolve) => {
      const waiter: Waiter = { target, resolve, timer: this.#o.scheduler.after(this.#o.finalizeTimeoutMs, () => this.#settle((w) => w === waiter)) };
      this.#waiters.push(waiter);
    });
  }

  /** Sends CloseStream (after a rest the shard holds), waits (bounded) for Deepgram to close, then frees the socket; idempotent. */
  close(): Promise<void> {
    this.#closing ??= this.#close();
    return this.#closing;
  }

  async #close(): Promise<void> {
    this.#o.scheduler.cancel(this.#keepAlive);
    if (this.#state === 'open') {
      this.#state = 'closing';
      this.#ws.sendText('{"type":"CloseStream"}', true);
      await new Promise<void>((resolve) => {
        const timer = this.#o.scheduler.after(this.#o.closeTimeoutMs, () => resolve());
        this.#socketClosed = () => {
          this.#o.scheduler.cancel(timer);
          resolve();
        };
      });
    }
    this.#state = 'closed';
    this.#ws.terminate();
    this.#settle(() => true);
    this.#o.onClosed();
  }

  #tick(): void {
    if (this.#state === 'open' && !this.#sentSinceTick) this.#ws.sendText('{"type":"KeepAlive"}', false);
    this.#sentSinceTick = false;
    // A provider that keeps its socket open but answers nothing would leave the audio unanswered until the kept tail's
    // bound drops it: fail it so the session keeps that audio.
    if (this.#stall.stalled(this.#sent > this.#acked) && this.#state === 'open') {
      this.#fail({ outcome: Outcome.UPSTREAM_ERROR, retryable: true, reason: 'provider_stalled' });
    }
  }

  #onText(text: string): void {
    this.#stall.heard();
    let msg: { type?: unknown };
    try {
      msg = JSON.parse(text) as { type?: unknown };
    } catch {
      return;
    }
    if (msg.type === 'Results') {
      const r = msg as DgResults;
      if (r.is_final !== true || typeof r.start !== 'number' || typeof r.duration !== 'number') return;
      this.emitSegments(segmentsOf(r));
      this.#ack(Math.round((r.start + r.duration) * SAMPLE_RATE_HZ));
      if (r.from_finalize === true) this.#settle(() => true);
    } else if (msg.type === 'Error') {
      this.#fail({ outcome: Outcome.UPSTREAM_ERROR, retryable: true, reason: 'provider_error' });
    }
  }

  #ack(samples: number): void {
    if (samples <= this.#acked) return;
    this.#acked = Math.min(samples, this.#sent);
    this.#settle((w) => w.target <= samples);
  }

  #settle(which: (w: Waiter) => boolean): void {
    const done = this.#waiters.filter(which);
    if (done.length === 0) return;
    this.#waiters = this.#waiters.filter((w) => !which(w));
    for (const w of done) {
      this.#o.scheduler.cancel(w.timer);
      w.resolve();
    }
  }

  #onClose(code: number, reason: string): void {
    if (this.#state === 'closing' || this.#state === 'closed') {
      this.#socketClosed?.();
      return;
    }
    this.#fail(streamFailure(code, reason), code);
  }

  #fail(failure: SttFailure, code?: number): void {
    if (this.#state !== 'open') return;
    this.#state = 'failed';
    this.#o.scheduler.cancel(this.#keepAlive);
    this.#ws.terminate();
    this.#settle(() => true);
    this.#o.onClosed();
    this.#o.logger.warn({ provider: this.provider, sessionId: this.#o.sessionId, code, reason: failure.reason, sentS: this.#sent / SAMPLE_RATE_HZ, ackedS: this.#acked / SAMPLE_RATE_HZ }, 'provider_a stream failed');
    this.emitFailure(failure);
  }
}
