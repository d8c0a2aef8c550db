// The speech-to-text contract every engine implements (local, provider_a, provider_b, custom): PCM in, timed words/segments out.
import type { ProviderSocket, SendPlan } from '../codec/uplink.js';
import type { Outcome } from '../protocol.js';
import type { Clock } from '../clock.js';
import type { Logger } from '../logger.js';
import type { Scheduler } from '../scheduler.js';

/** One piece of engine output, times in seconds from the start of the stream's audio. */
export interface SttSegment {
  text: string;
  /** Label such as SPEAKER_00; engines without diarization use SPEAKER_00. */
  speaker: string;
  start: number;
  end: number;
  /** True when the engine knows this is the device owner (channel 1 of a call, a profile match). */
  isUser?: boolean;
  /** Word timings when the engine gives them. */
  words?: { word: string; start: number; end: number }[];
}

export interface SttFailure {
  outcome: Outcome;
  retryable: boolean;
  /** Machine reason, e.g. connection_lost, initialization_failed. Never provider text. */
  reason: string;
}

/** Why an engine could not open a stream; `retryAfterMs` when the provider said how long to wait (HTTP 429 Retry-After). */
export class SttOpenError extends Error {
  readonly failure: SttFailure;
  readonly retryAfterMs: number | undefined;
  constructor(failure: SttFailure, message = failure.reason, retryAfterMs?: number) {
    super(message);
    this.name = 'SttOpenError';
    this.failure = failure;
    this.retryAfterMs = retryAfterMs;
  }
}

export interface SttStreamEvents {
  segments(segments: SttSegment[]): void;
  failure(failure: SttFailure): void;
}

export interface SttStreamOptions {
  /** BCP-47-ish code, or `multi`. */
  language: string;
  /** Always 16000: the decoder stage delivers 16 kHz mono Int16 PCM. */
  sampleRateHz: 16000;
  /** Session id, for logs only. */
  sessionId: string;
  /** The session's channel this stream serves (0, or 1 for a two-channel call's second). @defaultValue 0 */
  channel?: number;
  /**
   * The codec stream that decodes the session (engine/codec/stream.ts CodecStream): a remote engine opens the stream's
   * socket there, with its send plan, and the session's PCM goes onto it from the shard; through write() comes only
   * what still reaches this thread (the decoders' tail), and taken() tells the rest. Absent (audio written, not decoded:
   * the kept-audio job): the socket lives on this thread, and each write() goes out as one message.
   */
  shard?: SocketHost;
}

/**
 * Where a remote stream's provider socket lives. The contract between a session's codec stream and its speech
 * stream: the speech stream opens its socket there with a SendPlan (ProviderSocket.open()), and from then on the
 * codec stream holds audio back until it completes the plan's next message, the shard sends each decoded batch on
 * the socket as one message, and the session hears of it as counts (SttStream.taken()).
 */
export interface SocketHost {
  /** A provider socket for `channel`, not yet open, in the shard that decodes the session. */
  socket(channel: number): ProviderSocket;
}

export type { ProviderSocket, SendPlan };

/**
 * One per session (per channel for two-channel calls). write() never blocks; finalize() flushes what the engine
 * holds and resolves once its last segments were emitted; close() frees everything, idempotently.
 */
export interface SttStream {
  /** Provider name reported in segments (`stt_provider`) and in `ready`. */
  readonly provider: string;
  /**
   * 16 kHz mono PCM. The array may be a view into a buffer shared with other sessions (a codec shard's answer),
   * valid only during the call: the shard fills it again. Read it, never write into it or move its buffer to another
   * thread, and copy what is kept beyond the call.
   */
  write(pcm: Int16Array): void;
  /**
   * Remote engines: how many samples of the stream (from its start) final results have covered. The session keeps
   * the audio after that point, encoded (engine/audio/encoded-tail.ts), so a failed stream loses none of it. Local
   * engines, which cannot lose audio to a network, leave it out.
   */
  acknowledgedSamples?(): number;
  /** Remote engines: PCM of this stream's channel the codec shard sent on the stream's socket itself. */
  taken?(samples: number): void;
  finalize(): Promise<void>;
  close(): Promise<void>;
  on<E extends keyof SttStreamEvents>(event: E, listener: SttStreamEvents[E]): this;
  off<E extends keyof SttStreamEvents>(event: E, listener: SttStreamEvents[E]): this;
}

export interface SttEngine {
  readonly name: string;
  /** Whether this engine can serve `language`. */
  supports(language: string): boolean;
  /** Opens a stream; rejects with an error carrying an SttFailure-like `reason` when the engine cannot start. */
  open(opts: SttStreamOptions): Promise<SttStream>;
  close(): Promise<void>;
}

/** What every remote provider engine is built from (engine/stt/engines.ts passes config and the service's clocks). */
export interface RemoteEngineOptions {
  /** Streaming endpoint (PROVIDER_A_URL / PROVIDER_B_URL). */
  url: string;
  /** The provider key; never logged. */
  apiKey: string;
  clock: Clock;
  scheduler: Scheduler;
  logger: Logger;
  /** Provider model name; each engine has its default. */
  model?: string;
  /**
   * Audio per message on the provider socket, in milliseconds (20–250): the session's codec stream decodes its audio
   * in batches of this much (SendPlan.messageSamples). @defaultValue SEND_MS (engine/stt/remote/plan.ts)
   */
  sendMs?: number;
  /**
   * Random source (as Math.random) for the length of each stream's first message, drawn between 20 ms and sendMs:
   * streams that start together then do not complete their messages together for as long as they run (the codec
   * shards decode a session's audio when its next message is complete). Omitted: every message is sendMs long.
   */
  staggerFirst?: () => number;
}
