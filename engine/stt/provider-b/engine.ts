// The provider_b speech engine: the Soniox realtime WebSocket protocol, one connection per stream, made where the
// stream's socket lives (the session's codec shard).
import { socketHere, type ProviderSocket } from '../../codec/uplink.js';
import { ProviderBReason, PROVIDER_B_LANGUAGES, baseLanguage, configFrame, failureFor, failureFromStatus, retryAfterMs, type ProviderBConfigFrame } from './protocol.js';
import { SEND_MS, sendPlan, sendSamplesOf } from '../remote/plan.js';
import { PROVIDER, ProviderBStream, SAMPLE_RATE_HZ, type StreamDeps } from './stream.js';
import { SttOpenError, type RemoteEngineOptions, type SttEngine, type SttFailure, type SttStreamOptions } from '../types.js';

export { ProviderBStream } from './stream.js';

/** apiKey is sent as `Authorization: Bearer` on the upgrade and as `api_key` in the config frame; model defaults to 'stt-rt-v5'. */
export interface ProviderBEngineOptions extends RemoteEngineOptions {
  /** Longest wait for the upgrade, in milliseconds. @defaultValue 10000 */
  connectTimeoutMs?: number;
  /** A keepalive is sent once no audio or keepalive went out for this long, in milliseconds. @defaultValue 10000 */
  keepaliveMs?: number;
  /** Longest wait for `<fin>` after finalize(), in milliseconds. @defaultValue 5000 */
  finalizeTimeoutMs?: number;
  /** Longest wait for `finished` after the end of audio in close(), in milliseconds. @defaultValue 10000 */
  finishTimeoutMs?: number;
  /**
   * Audio streamed with no message back for this long fails the stream as `provider_stalled` (noticed at the next
   * check, every keepaliveMs / 2). @defaultValue 20000
   */
  stallTimeoutMs?: number;
  /** Bytes queued on the socket past which the stream fails with send_failed. @defaultValue 1048576 (about 32 s of audio) */
  maxBufferedBytes?: number;
}

/** Longest message taken from the provider, in bytes (its token messages are small). */
const MAX_PAYLOAD_BYTES = 4 * 1024 * 1024;

/**
 * One per process; each open() is one connection attempt, every refusal mapped onto an SttOpenError (retries, backoff
 * and fail-over belong to the layer above). The key goes both as `Authorization: Bearer` on the upgrade (the
 * provider's current way; config-only keys are refused from 2027-01-15) and as `api_key` in the config frame (what its
 * official Node SDK still sends). Logs carry ids, reasons and codes: never audio, transcript text or the key.
 */
export class ProviderBEngine implements SttEngine {
  readonly name = PROVIDER;
  readonly #url: string;
  readonly #apiKey: string;
  readonly #model: string;
  readonly #connectTimeoutMs: number;
  readonly #sendSamples: number;
  readonly #maxBufferedBytes: number;
  readonly #deps: StreamDeps;
  readonly #staggerFirst: (() => number) | undefined;
  readonly #streams = new Set<ProviderBStream>();
  #closed = false;

  constructor(options: ProviderBEngineOptions) {
    this.#url = options.url;
    this.#apiKey = options.apiKey;
    this.#model = options.model ?? 'stt-rt-v5';
    this.#connectTimeoutMs = options.connectTimeoutMs ?? 10000;
    this.#staggerFirst = options.staggerFirst;
    this.#sendSamples = sendSamplesOf(options.sendMs ?? SEND_MS);
    this.#maxBufferedBytes = options.maxBufferedBytes ?? 1024 * 1024;
    const keepaliveMs = options.keepaliveMs ?? 10000;
    if (!(keepaliveMs >= 1000 && keepaliveMs <= 15000)) throw new RangeError('keepaliveMs must be between 1000 and 15000 (the provider drops a stream silent for 20 s)');
    this.#deps = {
      clock: options.clock,
      scheduler: options.scheduler,
      logger: options.logger,
      keepaliveMs,
      finalizeTimeoutMs: options.finalizeTimeoutMs ?? 5000,
      finishTimeoutMs: options.finishTimeoutMs ?? 10000,
      stallTimeoutMs: options.stallTimeoutMs ?? 20_000,
    };
  }

  /** The provider model streams are opened with. */
  get model(): string {
    return this.#model;
  }

  /** The provider's documented languages (region suffixes ignored), plus `multi`. */
  supports(language: string): boolean {
    return language === 'multi' || PROVIDER_B_LANGUAGES.has(baseLanguage(language));
  }

  /** Resolves once the socket is open (the config frame goes first on it); rejects with SttOpenError. */
  open(opts: SttStreamOptions): Promise<ProviderBStream> {
    if (this.#closed) return Promise.reject(new SttOpenError(failureFor(ProviderBReason.INITIALIZATION_FAILED), 'engine closed'));
    if (!this.supports(opts.language)) return Promise.reject(new SttOpenError(failureFor(ProviderBReason.LANGUAGE_UNSUPPORTED)));
    if (opts.sampleRateHz !== SAMPLE_RATE_HZ) return Promise.reject(new RangeError('sampleRateHz must be 16000'));
    return this.#connect(opts.shard?.socket(opts.channel ?? 0) ?? socketHere(), opts);
  }

  #headers(): Record<string, string> {
    return { authorization: `Bearer ${this.#apiKey}` };
  }

  /**
   * The attempt over the stream's socket: where it lives (the session's codec shard, or this thread), it connects, sends the config
   * frame before any audio, and answers how the upgrade went. An error frame answering the config (a bad key)
   * arrives after this resolved and fails the stream then, as it would from a remote provider over the network.
   */
  #connect(socket: ProviderSocket, opts: SttStreamOptions): Promise<ProviderBStream> {
    return new Promise<ProviderBStream>((resolve, reject) => {
      const attempt = this.#attempt(opts.sessionId, () => socket.terminate(), reject);
      const spec = { url: this.#url, headers: this.#headers(), maxPayload: MAX_PAYLOAD_BYTES, maxBufferedBytes: this.#maxBufferedBytes, firstText: JSON.stringify(this.#configFrame(opts)) };
      socket.open(spec, sendPlan(this.#sendSamples, this.#staggerFirst)).then(
        (a) => {
          if (!a.ok && a.status !== undefined) return attempt.refuse(failureFromStatus(a.status), retryAfterMs(a.retryAfter, this.#deps.clock.now()));
          if (a.ok && !this.#closed && attempt.succeed()) return resolve(this.#opened(new ProviderBStream(socket, opts.sessionId, this.#deps, (s) => this.#streams.delete(s))));
          socket.terminate(); // refused without a status, timed out meanwhile, or the engine is closing
          attempt.refuse(failureFor(ProviderBReason.INITIALIZATION_FAILED));
        },
        () => attempt.refuse(failureFor(ProviderBReason.INITIALIZATION_FAILED)),
      );
    });
  }

  #configFrame(opts: SttStreamOptions): ProviderBConfigFrame {
    return configFrame(this.#apiKey, this.#model, opts.language, SAMPLE_RATE_HZ);
  }

  #opened(stream: ProviderBStream): ProviderBStream {
    this.#streams.add(stream);
    this.#deps.logger.info({ sessionId: stream.sessionId, provider: PROVIDER, model: this.#model }, 'stt provider stream opened');
    return stream;
  }

  /**
   * One open() attempt's end: refused at most once (the connect timer cancelled, the socket freed, a warn line, the
   * promise rejected with an SttOpenError), or succeed() once it is not (false when it already was).
   */
  #attempt(sessionId: string, free: () => void, reject: (err: SttOpenError) => void): { refuse(failure: SttFailure, afterMs?: number): void; succeed(): boolean } {
    const { scheduler, logger } = this.#deps;
    let settled = false;
    const refuse = (failure: SttFailure, afterMs?: number): void => {
      if (settled) return;
      settled = true;
      scheduler.cancel(timer);
      free();
      logger.warn({ sessionId, provider: PROVIDER, reason: failure.reason, retryAfterMs: afterMs }, 'stt provider refused the stream');
      reject(new SttOpenError(failure, failure.reason, afterMs));
    };
    const timer = scheduler.after(this.#connectTimeoutMs, () => refuse(failureFor(ProviderBReason.INITIALIZATION_FAILED)));
    return {
      refuse,
      succeed(): boolean {
        if (settled) return false;
        settled = true;
        scheduler.cancel(timer);
        return true;
      },
    };
  }

  /** Closes every open stream (each flushes, bounded) and refuses new ones. */
  async close(): Promise<void> {
    this.#closed = true;
    await Promise.all([...this.#streams].map((s) => s.close()));
  }
}
