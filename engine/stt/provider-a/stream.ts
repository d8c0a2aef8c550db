// One provider_a session: PCM out on a Deepgram live socket in 20–250 ms messages, final Results in as segments.
//
// Rationale: write() goes through a PcmBatcher (100 ms messages by default, no timer per stream). One repeating scheduler entry per stream sends KeepAlive when no audio went out during the last period, so
// a long pause outlives Deepgram's 10 s idle rule. How far final results (Deepgram's `start + duration`) have covered
// the audio is told by acknowledgedSamples(); the audio itself is kept, encoded, by the session (engine/audio/
// encoded-tail.ts), so a message goes back to the pool as soon as the socket has it. A failure is reported once.
import type { ProviderSocket } from '../remote/socket.js';
import type { Logger } from '../../logger.js';
import type { Scheduler, TimerId } from '../../scheduler.js';
import { SAMPLE_RATE_HZ, segmentsOf, streamFailure, type DgResults } from './protocol.js';
import type { PcmChunkPool } from '../remote/chunk-pool.js';
import { MIN_SEND_SAMPLES, PcmBatcher } from '../remote/pcm-batcher.js';
import type { StaleFlusher } from '../remote/stale-flusher.js';
import { SttEmitter } from '../stt-emitter.js';
import type { SttFailure, SttStream } from '../types.js';
import { Outcome } from '../../protocol.js';


export interface ProviderAStreamOptions {
  sessionId: string;
  scheduler: Scheduler;
  logger: Logger;
  keepAliveMs: number;
  finalizeTimeoutMs: number;
  closeTimeoutMs: number;
  /** Bytes queued on the socket beyond which the provider is deemed stuck (reason send_failed). */
  maxBufferedBytes: number;
  /** Audio buffered before a message goes out, in samples: 320 (20 ms) to 4000 (250 ms). */
  sendSamples: number;
  /** Samples of the first message (sendSamples, or fewer to stagger streams that start together); with a socket in the shard, the first hold. */
  firstSamples: number;
  /** The engine's message arrays (`samples` = sendSamples): a message goes back once the socket has it. */
  chunks: PcmChunkPool;
  /** Sends a rest left by a pause. */
  flusher: StaleFlusher;
  onClosed: () => void;
}

interface Waiter {
  target: number;
  resolve: () => void;
  timer: TimerId;
}

export class ProviderAStream extends SttEmitter implements SttStream {
  readonly provider = 'provider_a';
  readonly #ws: ProviderSocket;
  readonly #o: ProviderAStreamOptions;
  #state: 'open' | 'closing' | 'failed' | 'closed' = 'open';
  readonly #batcher: PcmBatcher;
  /** Samples handed to the socket, and samples covered by final results. */
  #sent = 0;
  #acked = 0;
  #sentSinceTick = false;
  readonly #keepAlive: TimerId;
  #waiters: Waiter[] = [];
  #socketClosed: (() => void) | undefined;
  #closing: Promise<void> | undefined;

  constructor(ws: ProviderSocket, o: ProviderAStreamOptions) {
    super();
    this.#ws = ws;
    this.#o = o;
    ws.listen({
      text: (text) => this.#onText(text),
      close: (code, reason) => this.#onClose(code, reason),
      stuck: () => this.#fail({ outcome: Outcome.UPSTREAM_ERROR, retryable: true, reason: 'send_failed' }),
    });
    this.#keepAlive = o.scheduler.every(o.keepAliveMs, () => this.#tick());
    this.#batcher = new PcmBatcher({ sendSamples: o.sendSamples, minSamples: MIN_SEND_SAMPLES, firstSamples: o.firstSamples, pool: o.chunks, flusher: o.flusher, send: (pcm) => this.#sendAudio(pcm) });
  }

  /**
   * Takes 16 kHz mono PCM; sends a message once `sendSamples` are buffered (the bytes are copied, the caller keeps its
   * array). Ignored once the stream closed or failed.
   */
  write(pcm: Int16Array): void {
    if (this.#state !== 'open' || pcm.length === 0) return;
    if (!this.#ws.inShard) return this.#batcher.write(pcm);
    // What still reaches this thread with the socket in the shard (the decoders' tail): after the shard's own audio.
    this.#ws.sendAudio(pcm);
    this.taken(pcm.length);
  }

  /** PCM the session's codec shard sent on this stream's socket (a socket in the shard). */
  taken(samples: number): void {
    if (this.#state !== 'open') return;
    this.#sent += samples;
    this.#sentSinceTick = true;
  }

  /** Samples covered by final results (at most those sent): the session keeps the audio after them. */
  acknowledgedSamples(): number {
    return this.#acked;
  }

  samplesUntilSend(): number {
    if (this.#state !== 'open') return 0;
    // In the shard every decoded batch is one message: the hold is a message's worth each time.
    if (this.#ws.inShard) return this.#sent === 0 ? this.#o.firstSamples : this.#o.sendSamples;
    return this.#batcher.samplesUntilSend;
  }

  /** Sends what is buffered and Finalize; resolves once Deepgram answered for it (from_finalize) or after finalizeTimeoutMs. */
  finalize(): Promise<void> {
    if (this.#state !== 'open') return Promise.resolve();
    this.#batcher.flush();
    const target = this.#sent;
    if (this.#acked >= target || this.#state !== 'open') return Promise.resolve();
    this.#ws.sendText('{"type":"Finalize"}', true);
    return new Promise<void>((resolve) => {
      const waiter: Waiter = { target, resolve, timer: this.#o.scheduler.after(this.#o.finalizeTimeoutMs, () => this.#settle((w) => w === waiter)) };
      this.#waiters.push(waiter);
    });
  }

  /** Sends what is buffered and CloseStream, waits (bounded) for Deepgram to close, then frees the socket; idempotent. */
  close(): Promise<void> {
    this.#closing ??= this.#close();
    return this.#closing;
  }

  async #close(): Promise<void> {
    this.#o.scheduler.cancel(this.#keepAlive);
    if (this.#state === 'open') {
      this.#batcher.flush();
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
    }
    this.#state = 'closed';
    this.#batcher.stop();
    this.#ws.terminate();
    this.#settle(() => true);
    this.#o.onClosed();
  }

  #sendAudio(pcm: Int16Array): void {
    if (this.#state !== 'open') return;
    this.#sent += pcm.length;
    this.#sentSinceTick = true;
    // ws masks a client frame into its own buffer, so the array is free again once send() returns.
    this.#ws.sendAudio(pcm);
    this.#o.chunks.give(pcm);
    if (this.#ws.bufferedAmount > this.#o.maxBufferedBytes) this.#fail({ outcome: Outcome.UPSTREAM_ERROR, retryable: true, reason: 'send_failed' });
  }

  #tick(): void {
    if (this.#state === 'open' && !this.#sentSinceTick) this.#ws.sendText('{"type":"KeepAlive"}', false);
    this.#sentSinceTick = false;
  }

  #onText(text: string): void {
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
    this.#batcher.stop();
    this.#o.scheduler.cancel(this.#keepAlive);
    this.#ws.terminate();
    this.#settle(() => true);
    this.#o.onClosed();
    this.#o.logger.warn({ provider: this.provider, sessionId: this.#o.sessionId, code, reason: failure.reason, sentS: this.#sent / SAMPLE_RATE_HZ, ackedS: this.#acked / SAMPLE_RATE_HZ }, 'provider_a stream failed');
    this.emitFailure(failure);
  }
}
