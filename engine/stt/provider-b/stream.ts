// One provider_b stream: config sent, PCM out, final tokens in as segments, keepalive, finalize, end of audio, failures.
import type { ProviderSocket } from '../../codec/uplink.js';
import type { Clock } from '../../clock.js';
import type { Logger } from '../../logger.js';
import type { Scheduler, TimerId } from '../../scheduler.js';
import { ProviderBReason, failureFor, failureFromErrorFrame, type ProviderBMessage, type ProviderBToken } from './protocol.js';
import { TokenSegmenter } from './segments.js';
import { SttEmitter } from '../stt-emitter.js';
import { StallWatch, stallPeriods } from '../remote/stall.js';
import type { SttFailure, SttStream } from '../types.js';

export const SAMPLE_RATE_HZ = 16000;
export const PROVIDER = 'provider_b';

/** @internal what the engine hands each stream */
export interface StreamDeps {
  clock: Clock;
  scheduler: Scheduler;
  logger: Logger;
  keepaliveMs: number;
  finalizeTimeoutMs: number;
  finishTimeoutMs: number;
  /** Audio streamed with no message back for this long fails the stream as stalled (checked every keepaliveMs / 2). */
  stallTimeoutMs: number;
}

interface FinalizeWaiter {
  done: boolean;
  resolve: () => void;
  timer: TimerId;
}

/**
 * One session's stream. Create with `ProviderBEngine.open()`. The session's codec shard sends the decoded audio on the
 * socket itself, in messages of the stream's send plan; this side learns what went out from taken(). A keepalive goes
 * out when no audio was sent for `keepaliveMs` (the provider drops a stream silent for 20 s), from one scheduler entry
 * per stream. Only final tokens become segments; audio covered by the provider's `final_audio_proc_ms` is told by
 * acknowledgedSamples() (the session keeps the rest, encoded). A stream fails at most once; the words already final
 * are emitted before the failure. Logs carry ids, reasons and codes only.
 */
export class ProviderBStream extends SttEmitter implements SttStream {
  readonly provider = PROVIDER;
  readonly sessionId: string;
  readonly #ws: ProviderSocket;
  readonly #deps: StreamDeps;
  readonly #onGone: (stream: ProviderBStream) => void;
  readonly #segmenter = new TokenSegmenter();
  /** Samples written, and samples covered by final tokens. */
  #written = 0;
  #acked = 0;
  #state: 'open' | 'closing' | 'failed' | 'closed' = 'open';
  #failure: SttFailure | undefined;
  #lastActivityMs: number;
  /** Checks in a row with audio out and no message back. */
  readonly #stall: StallWatch;
  #keepalive: TimerId | undefined;
  #finalizers: FinalizeWaiter[] = [];
  #finished: (() => void) | undefined;
  #closing: Promise<void> | undefined;

  /** Built by ProviderBEngine.open() once the upgrade succeeded. */
  constructor(ws: ProviderSocket, sessionId: string, deps: StreamDeps, onGone: (stream: ProviderBStream) => void) {
    super();
    this.#ws = ws;
    this.sessionId = sessionId;
    this.#deps = deps;
    this.#onGone = onGone;
    this.#lastActivityMs = deps.clock.now();
    this.#stall = new StallWatch(stallPeriods(deps.stallTimeoutMs, deps.keepaliveMs / 2));
    ws.listen({
      text: (text) => this.#message(text),
      close: () => {
        if (this.#state === 'open') this.#fail(failureFor(ProviderBReason.CONNECTION_LOST));
        else this.#finished?.();
      },
      stuck: () => this.#fail(failureFor(ProviderBReason.SEND_FAILED)),
    });
    this.#keepalive = deps.scheduler.every(deps.keepaliveMs / 2, () => this.#tick());
  }

  /** Why the stream failed, once it has. */
  get failure(): SttFailure | undefined {
    return this.#failure;
  }

  /**
   * PCM that reached this thread (the decoders' tail, or a job's audio): one message, after what the shard sent itself
   * (copied: the caller's array may be a shared view). Ignored unless the stream is open.
   */
  write(pcm: Int16Array): void {
    if (this.#state !== 'open' || pcm.length === 0) return;
    this.#ws.sendAudio(pcm);
    this.taken(pcm.length);
  }

  /** PCM the session's codec shard sent on this stream's socket. */
  taken(samples: number): void {
    if (this.#state !== 'open') return;
    this.#written += samples;
    this.#lastActivityMs = this.#deps.clock.now();
    this.#stall.sent();
  }

  /** Samples covered by final tokens (at most those written): the session keeps the audio after them. */
  acknowledgedSamples(): number {
    return this.#acked;
  }

  #acknowledge(sample: number): void {
    this.#acked = Math.max(this.#acked, Math.min(sample, this.#written));
  }

  /** Asks the provider to finalize what it heard; resolves once `<fin>` arrived (and its segments were emitted), or after finalizeTimeoutMs. */
  finalize(): Promise<void> {
    if (this.#state !== 'open') return Promise.resolve();
    return new Promise<void>((resolve) => {
      const waiter: FinalizeWaiter = { done: false, resolve, timer: 0 };
      waiter.timer = this.#deps.scheduler.after(this.#deps.finalizeTimeoutMs, () => this.#settle(waiter));
      this.#finalizers.push(waiter);
      this.#ws.sendText(JSON.stringify({ type: 'finalize' }), true);
    });
  }

  /** Ends the audio (empty frame), waits for `finished` (bounded) so the last words are emitted, then closes; idempotent. */
  close(): Promise<void> {
    this.#closing ??= this.#close();
    return this.#closing;
  }

  async #close(): Promise<void> {
    const { scheduler } = this.#deps;
    if (this.#state === 'open') {
      this.#state = 'closing';
      scheduler.cancel(this.#keepalive);
      const finished = new Promise<void>((resolve) => (this.#finished = resolve));
      const timer = scheduler.after(this.#deps.finishTimeoutMs, () => this.#finished?.());
      this.#ws.sendText('', true);
      await finished;
      scheduler.cancel(timer);
    }
    const wasFailed = this.#state === 'failed';
    this.#state = 'closed';
    this.#stop();
    if (!wasFailed) this.emitSegments(this.#segmenter.flush());
    this.#ws.close(1000);
    const left = this.#written - this.#acked;
    this.#deps.logger.info({ sessionId: this.sessionId, provider: PROVIDER, unacknowledgedMs: Math.round((left * 1000) / SAMPLE_RATE_HZ) }, 'stt provider stream closed');
    this.#onGone(this);
  }

  #message(text: string): void {
    if (this.#state !== 'open' && this.#state !== 'closing') return;
    this.#stall.heard();
    let msg: ProviderBMessage;
    try {
      msg = JSON.parse(text) as ProviderBMessage;
    } catch {
      return;
    }
    if (!msg || typeof msg !== 'object') return;
    if (msg.error_code !== undefined && msg.error_code !== null) return this.#providerError(msg);
    const tokens = Array.isArray(msg.tokens) ? (msg.tokens as ProviderBToken[]) : [];
    const { segments, fins } = this.#segmenter.push(tokens);
    this.emitSegments(segments);
    if (typeof msg.final_audio_proc_ms === 'number') this.#acknowledge(Math.floor((msg.final_audio_proc_ms * SAMPLE_RATE_HZ) / 1000));
    for (let i = 0; i < fins; i++) {
      const waiter = this.#finalizers.shift();
      if (waiter) this.#settle(waiter);
    }
    if (msg.finished === true) {
      this.emitSegments(this.#segmenter.flush());
      this.#acknowledge(this.#written);
      this.#finished?.();
    }
  }

  #providerError(msg: ProviderBMessage): void {
    const failure = failureFromErrorFrame(msg);
    if (this.#state === 'open') return this.#fail(failure, Number(msg.error_code));
    // Closing: the caller is done with the stream; what was not finalized stays unacknowledged.
    this.#deps.logger.warn({ sessionId: this.sessionId, provider: PROVIDER, reason: failure.reason, errorCode: Number(msg.error_code) }, 'stt provider error while closing');
    this.#finished?.();
  }

  /** One failure event per stream; the words already final are emitted first. */
  #fail(failure: SttFailure, errorCode?: number): void {
    if (this.#state !== 'open') return;
    this.#state = 'failed';
    this.#failure = failure;
    this.#stop();
    this.emitSegments(this.#segmenter.flush());
    this.#deps.logger.warn({ sessionId: this.sessionId, provider: PROVIDER, reason: failure.reason, retryable: failure.retryable, errorCode }, 'stt provider stream failed');
    this.emitFailure(failure);
    this.#ws.terminate();
  }

  #tick(): void {
    if (this.#state !== 'open') return;
    // A socket that stays open but answers nothing would leave the audio unanswered until the kept tail's bound drops
    // it: fail it so the session keeps that audio.
    if (this.#stall.stalled(this.#written > this.#acked)) return this.#fail(failureFor(ProviderBReason.STALLED));
    const now = this.#deps.clock.now();
    if (now - this.#lastActivityMs < this.#deps.keepaliveMs) return;
    this.#ws.sendText(JSON.stringify({ type: 'keepalive' }), false);
    this.#lastActivityMs = now;
  }

  #settle(waiter: FinalizeWaiter): void {
    if (waiter.done) return;
    waiter.done = true;
    this.#deps.scheduler.cancel(waiter.timer);
    waiter.resolve();
  }

  /** Stops the keepalive and releases every finalize() waiting. */
  #stop(): void {
    this.#deps.scheduler.cancel(this.#keepalive);
    this.#keepalive = undefined;
    for (const w of this.#finalizers.splice(0)) this.#settle(w);
  }
}
