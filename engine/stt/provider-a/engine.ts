// provider_a: speech-to-text over Deepgram's live streaming protocol (`wss://api.deepgram.com/v1/listen` or a compatible URL),
// over the codec shard's own socket client (engine/codec/uplink.ts) rather than @deepgram/sdk.
import { Outcome } from '../../protocol.js';
import { NOVA3_LANGUAGES } from './languages.js';
import { SAMPLE_RATE_HZ, cleanKeyterms, listenUrl, openFailure, retryAfterMs } from './protocol.js';
import { SEND_MS, sendPlan, sendSamplesOf } from '../remote/plan.js';
import { stallPeriods } from '../remote/stall.js';
import { socketHere, type ProviderSocket } from '../../codec/uplink.js';
import { ProviderAStream } from './stream.js';
import { SttOpenError, type RemoteEngineOptions, type SttEngine, type SttStreamOptions } from '../types.js';

/** apiKey is sent as `Authorization: Token <key>`; model defaults to 'nova-3'. */
export interface ProviderAEngineOptions extends RemoteEngineOptions {
  /** Vocabulary sent as `keyterm` (Nova-3) or `keywords`; trimmed, de-duplicated, at most 100. @defaultValue [] */
  keyterms?: readonly string[];
  /** One connection attempt's limit, in milliseconds. @defaultValue 5000 */
  connectTimeoutMs?: number;
  /** Period of the keep-alive check; a period without audio sends KeepAlive (Deepgram closes after 10 s idle). @defaultValue 4000 */
  keepAliveMs?: number;
  /** Longest wait for the answer to Finalize. @defaultValue 5000 */
  finalizeTimeoutMs?: number;
  /** Longest wait for Deepgram to close after CloseStream. @defaultValue 3000 */
  closeTimeoutMs?: number;
  /**
   * Audio streamed with no message back for this long fails the stream as `provider_stalled` (noticed at the next
   * keep-alive check). @defaultValue 20000
   */
  stallTimeoutMs?: number;
  /** Audio queued on a socket that does not drain before the stream fails with send_failed, in seconds. @defaultValue 15 */
  maxBufferedS?: number;
}

/** Longest message taken from provider_a, in bytes. */
const MAX_PAYLOAD_BYTES = 4 * 1024 * 1024;

/**
 * One per process. open() is exactly one connection attempt whose refusal must be seen with its HTTP status and
 * Retry-After (the SDK reports only "Unexpected server response"); sockets never reconnect or queue audio behind the
 * fail-over layer's back (the SDK reconnects by default and queues sends while it does); every timer goes through the
 * injected Scheduler. The fake in test/fakes/deepgram-server.ts is checked against the SDK, so the protocol stays
 * Deepgram's.
 */
export class ProviderAEngine implements SttEngine {
  readonly name = 'provider_a';
  readonly #o: Required<Omit<ProviderAEngineOptions, 'keyterms' | 'staggerFirst'>> & { keyterms: string[]; staggerFirst?: () => number };
  readonly #sendSamples: number;
  readonly #streams = new Set<ProviderAStream>();
  #closed = false;

  constructor(options: ProviderAEngineOptions) {
    if (!options.apiKey) throw new RangeError('apiKey is required');
    const url = new URL(options.url);
    if (url.protocol !== 'wss:' && url.protocol !== 'ws:') throw new RangeError('url must be ws: or wss:');
    this.#o = {
      model: 'nova-3',
      connectTimeoutMs: 5000,
      keepAliveMs: 4000,
      finalizeTimeoutMs: 5000,
      closeTimeoutMs: 3000,
      stallTimeoutMs: 20_000,
      maxBufferedS: 15,
      sendMs: SEND_MS,
      ...options,
      keyterms: cleanKeyterms(options.keyterms),
    };
    if (!(this.#o.keepAliveMs > 0 && this.#o.keepAliveMs <= 5000)) throw new RangeError('keepAliveMs must be in (0, 5000] so a pause outlives the 10 s idle rule');
    this.#sendSamples = sendSamplesOf(this.#o.sendMs);
  }

  /** Nova-3's streaming languages and `multi`. */
  supports(language: string): boolean {
    return NOVA3_LANGUAGES.has(language);
  }

  /** Open streams (for metrics and tests). */
  get load(): number {
    return this.#streams.size;
  }

  /** One connection attempt: resolves once the socket is open, or rejects with an SttOpenError saying why. */
  open(opts: SttStreamOptions): Promise<ProviderAStream> {
    const o = this.#o;
    if (this.#closed) return Promise.reject(new SttOpenError({ outcome: Outcome.UPSTREAM_ERROR, retryable: false, reason: 'initialization_failed' }, 'engine closed'));
    if (!this.supports(opts.language)) {
      return Promise.reject(new SttOpenError({ outcome: Outcome.CONFIG_ERROR, retryable: false, reason: 'language_unsupported' }, `provider_a cannot serve ${opts.language}`));
    }
    if (opts.sampleRateHz !== SAMPLE_RATE_HZ) return Promise.reject(new RangeError('sampleRateHz must be 16000'));
    const log = { provider: this.name, sessionId: opts.sessionId };
    const url = listenUrl(o.url, o.model, opts.language, o.keyterms);
    const headers = { Authorization: `Token ${o.apiKey}` };
    const maxBufferedBytes = Math.round(o.maxBufferedS * SAMPLE_RATE_HZ * 2);
    return new Promise<ProviderAStream>((resolve, reject) => {
      let settled = false;
      // In the shard that decodes the session, or here when the audio is written rather than decoded.
      const socket = opts.shard?.socket(opts.channel ?? 0) ?? socketHere();
      const fail = (status: number | undefined, retryAfter: string | undefined, why: string): void => {
        if (settled) return;
        settled = true;
        o.scheduler.cancel(timer);
        socket.terminate();
        const failure = openFailure(status);
        const waitMs = status === 429 || status === 503 ? retryAfterMs(retryAfter, o.clock.now()) : undefined;
        o.logger.warn({ ...log, status, reason: failure.reason, why, retryAfterMs: waitMs }, 'provider_a connect failed');
        reject(new SttOpenError(failure, `provider_a ${why}`, waitMs));
      };
      const timer = o.scheduler.after(o.connectTimeoutMs, () => fail(undefined, undefined, 'connect timeout'));
      socket.open({ url, headers, maxPayload: MAX_PAYLOAD_BYTES, maxBufferedBytes }, sendPlan(this.#sendSamples, o.staggerFirst)).then(
        (a) => {
          if (!a.ok) {
            if (a.status !== undefined) o.logger.debug({ ...log, status: a.status, requestId: a.requestId }, 'provider_a handshake refused');
            return fail(a.status, a.retryAfter, a.why);
          }
          if (settled) return socket.terminate();
          settled = true;
          o.scheduler.cancel(timer);
          resolve(this.#stream(socket, opts.sessionId));
        },
        (err: unknown) => fail(undefined, undefined, `codec thread ${(err as Error)?.name ?? 'error'}`),
      );
    });
  }

  #stream(socket: ProviderSocket, sessionId: string): ProviderAStream {
    const o = this.#o;
    const stream: ProviderAStream = new ProviderAStream(socket, {
      sessionId,
      scheduler: o.scheduler,
      logger: o.logger,
      keepAliveMs: o.keepAliveMs,
      finalizeTimeoutMs: o.finalizeTimeoutMs,
      closeTimeoutMs: o.closeTimeoutMs,
      stallPeriods: stallPeriods(o.stallTimeoutMs, o.keepAliveMs),
      onClosed: () => this.#streams.delete(stream),
    });
    this.#streams.add(stream);
    o.logger.debug({ provider: this.name, sessionId }, 'provider_a stream open');
    return stream;
  }

  /** Closes every open stream (CloseStream, bounded wait) and refuses new ones. */
  async close(): Promise<void> {
    this.#closed = true;
    await Promise.all([...this.#streams].map((s) => s.close()));
  }
}
