// A session's speech side: one stream per channel with fail-over, PCM routed to them, and when a stream fails every
// sample no engine acknowledged kept (held encoded as the device sent it, decoded again only then). With a local
// engine, a batch the codec lost with its thread is decoded again and written in its place.
import type { Logger } from '../logger.js';
import type { Scheduler } from '../scheduler.js';
import { Outcome } from '../protocol.js';
import type { EngineList } from '../stt/engine-list.js';
import { openStreams } from '../stt/failover.js';
import type { SttFailure, SttSegment, SttStream } from '../stt/types.js';
import type { CodecStream } from '../codec/stream.js';
import type { KeptAudioMeta } from '../stt/kept-audio.js';
import { countWords, type UsageRecorder } from '../stt/usage.js';
import { EncodedTail, type EncodedSlice } from '../audio/encoded-tail.js';

/**
 * What the speech side asks of the session's codec stream: its provider sockets in the stream's shard (each opened
 * with its send plan), and the encoded audio it keeps per channel as each message leaves for the decoder.
 */
export type SessionCodec = Pick<CodecStream, 'socket' | 'keepEncoded'>;

export interface SessionSttOptions {
  registry: EngineList;
  language: string;
  sttService: string | null;
  channels: number;
  sessionId: string;
  scheduler: Scheduler;
  logger: Logger;
  /** Seconds of audio and words transcribed are recorded here (per user, provider, day) when the streams close. */
  usage?: { recorder: UsageRecorder; uid: string; now: () => number };
  /**
   * The session's codec stream: remote engines open their sockets in its shard (their PCM is then reported by
   * uplinked()), and with one, the audio their final results have not yet covered is kept encoded.
   */
  codec?: SessionCodec | undefined;
  /**
   * Remote engines open their sockets on this thread rather than in the codec shard, so every PCM batch reaches the
   * session (its audio_bytes webhooks): the session pays the thread's share of sending it.
   */
  socketsHere?: boolean;
  /** A fresh decoder for kept encoded audio, used only when a remote engine fails. */
  decodeKept?: (messages: readonly Uint8Array[]) => Promise<Int16Array>;
  /**
   * A fresh decoder for a batch the codec lost with its thread (lost()); with it, a session on an engine that answers
   * for all it is given (local) keeps its audio encoded until decoded, as a remote engine's does until answered.
   */
  decodeLost?: (messages: readonly Uint8Array[]) => Promise<Int16Array>;
  /** Unanswered audio kept per channel at most, in seconds (a provider that never answers). @defaultValue 120 */
  maxKeptS?: number;
  /** Provider health for /metrics: failed open attempts, and how far final results trail the audio sent. */
  metrics?: SessionSttMetrics;
  onSegments(segments: SttSegment[], provider: string, channel: number): void;
  onFailure(failure: SttFailure, provider: string): void;
}

export interface SessionSttMetrics {
  openFailed(provider: string, reason: string): void;
  /** The observer of a provider's result lag in seconds; asked once per session. */
  resultLag(provider: string): { observe(seconds: number): void };
}

/** Audio of one channel no engine answered for: from `startS` seconds of the stream. */
export interface KeptChannel {
  channel: number;
  startS: number;
  chunks: Int16Array[];
  samples: number;
  /** Encoded audio still to decode into the front of `chunks`: stream samples [from, to). */
  replay?: EncodedSlice & { from: number; to: number };
}

const SAMPLE_RATE = 16000;

/** PCM of a channel that came after a lost batch, or that batch decoded again (per channel): delivered in this order. */
type Queued = { channel: number; pcm: Int16Array } | { replay: Promise<(Int16Array | undefined)[]> };

export class SessionStt {
  readonly #o: SessionSttOptions;
  #streams: SttStream[] = [];
  /** Samples written per channel since the stream began (stream time). */
  readonly #written: number[];
  /** Of those, the samples already recorded as usage (close() may run more than once). */
  #billed = 0;
  /** Per channel, the stream's acknowledged samples when its tail was last trimmed (a trim only when they moved). */
  readonly #released: number[];
  /** Set once a stream failed: PCM goes here instead of to the engines. */
  #kept: KeptChannel[] | undefined;
  /**
   * Each channel's audio as sent to the decoder, from a little before the provider's last final result (remote
   * engines) or the last PCM written (a local engine, when decodeLost is given).
   */
  #tails: EncodedTail[] | undefined;
  /** A local engine's session: a batch the codec lost is decoded again from #tails (lost()). */
  #redecode = false;
  /** Per channel, the stream samples that reached the session: written, queued, or lost and being decoded again. */
  readonly #placed: number[];
  /** While a lost batch is decoded again: what came after it, in order (#deliverQueued()). */
  #queue: Queued[] = [];
  #delivering: Promise<void> | undefined;
  provider: string | undefined;
  fallbackFrom: string | undefined;
  /** Words in the engines' segments so far (usage). */
  words = 0;
  /** Observes the result lag of this session's provider (SessionSttMetrics.resultLag). */
  #lag: { observe(seconds: number): void } | undefined;
  /** Per channel, the acknowledged samples when the lag was last observed (once per move of the mark). */
  #lagAcked: number[] = [];

  constructor(opts: SessionSttOptions) {
    this.#o = opts;
    this.#written = new Array<number>(opts.channels).fill(0);
    this.#released = new Array<number>(opts.channels).fill(0);
    this.#placed = new Array<number>(opts.channels).fill(0);
  }

  get failed(): boolean {
    return this.#kept !== undefined;
  }

  /**
   * Opens the streams. Resolves 'ok', 'cancelled' (the client left first), or the failure to report (stt_failed):
   * no eligible engine is a config_error (fail closed: docs/protocol.md, Rejections and close codes).
   */
  async open(signal: AbortSignal): Promise<'ok' | 'cancelled' | { failure: SttFailure; provider: string }> {
    const o = this.#o;
    const engines = o.registry.candidates(o.language, o.sttService);
    if (engines.length === 0) return { failure: { outcome: Outcome.CONFIG_ERROR, retryable: false, reason: 'language_not_supported' }, provider: 'none' };
    const r = await openStreams({
      engines,
      channels: o.channels,
      stream: { language: o.language, sampleRateHz: SAMPLE_RATE, sessionId: o.sessionId, ...(o.codec && !o.socketsHere ? { shard: o.codec } : {}) },
      scheduler: o.scheduler,
      signal,
      onAttemptFailed: (engine, attempt, f) => {
        o.logger.warn({ sessionId: o.sessionId, engine, attempt, reason: f.reason }, 'speech provider did not open');
        o.metrics?.openFailed(engine, f.reason);
      },
    });
    if (!r.ok) return r.cancelled ? 'cancelled' : { failure: r.failure, provider: r.provider };
    this.provider = r.engine.name;
    this.fallbackFrom = r.fallbackFrom;
    this.#streams = r.streams;
    if (o.metrics && r.streams.some((s) => s.acknowledgedSamples !== undefined)) this.#lag = o.metrics.resultLag(r.engine.name);
    const remote = r.streams.some((s) => s.acknowledgedSamples !== undefined);
    this.#redecode = !remote && o.decodeLost !== undefined;
    if (o.codec && (remote || this.#redecode)) {
      const max = Math.round((o.maxKeptS ?? 120) * SAMPLE_RATE);
      this.#tails = r.streams.map(() => new EncodedTail(max));
      // Kept as each message leaves for the decoder; after a failure too, until the tails are read: the shard may
      // still send the PCM of audio that left for it then on the failed socket.
      o.codec.keepEncoded(this.#tails);
    }
    r.streams.forEach((s, ch) => {
      s.on('segments', (segs) => {
        if (this.#kept) return;
        // Engines move their acknowledged mark after emitting the message's segments: read it once they are done.
        if (this.#lag) queueMicrotask(() => this.#observeLag(ch, s));
        for (const x of segs) this.words += countWords(x.text, o.language);
        o.onSegments(segs, s.provider, ch);
      });
      s.on('failure', (f) => this.#fail(f, s.provider));
    });
    return 'ok';
  }

  /**
   * PCM of `channel` the codec shard sent on the channel's provider socket itself (SessionSttOptions.codec). After a
   * failure it still counts: it went to a socket that failed, so it is decoded again from the kept encoded tail.
   */
  uplinked(channel: number, samples: number): void {
    const ch = Math.min(channel, this.#o.channels - 1);
    this.#written[ch]! += samples;
    if (this.#kept) return;
    const s = this.#streams[ch];
    s?.taken?.(samples);
    this.#release(ch, s);
  }

  /**
   * Finals move the acknowledgement every second or two; between them the tail is not touched. A local engine answers
   * for what it was written.
   */
  #release(ch: number, s: SttStream | undefined): void {
    const acked = this.#redecode ? this.#written[ch] : s?.acknowledgedSamples?.();
    if (acked !== undefined && acked !== this.#released[ch]) {
      this.#released[ch] = acked;
      this.#tails?.[ch]?.release(acked);
    }
  }

  /** As results arrive: when final ones moved the acknowledged mark, how much audio sent is still beyond it. */
  #observeLag(ch: number, s: SttStream): void {
    const acked = s.acknowledgedSamples?.();
    if (acked === undefined || acked === (this.#lagAcked[ch] ?? 0)) return;
    this.#lagAcked[ch] = acked;
    this.#lag?.observe(Math.max(0, this.#written[ch]! - acked) / SAMPLE_RATE);
  }

  /** PCM of `channel`; after a failure it is kept instead. */
  write(channel: number, pcm: Int16Array): void {
    const ch = Math.min(channel, this.#o.channels - 1);
    this.#placed[ch]! += pcm.length;
    if (this.#queue.length > 0) {
      this.#queue.push({ channel: ch, pcm: pcm.slice() }); // a view valid only during the call
      return;
    }
    this.#deliver(ch, pcm);
  }

  #deliver(ch: number, pcm: Int16Array): void {
    if (this.#kept) {
      const k = this.#kept[ch];
      if (k) {
        k.chunks.push(pcm.slice());
        k.samples += pcm.length;
      }
      return;
    }
    const s = this.#streams[ch];
    if (!s) return;
    this.#written[ch]! += pcm.length;
    s.write(pcm);
    this.#release(ch, s);
  }

  /**
   * The codec lost the batch in flight with its thread. With a local engine that batch is decoded again from the
   * encoded tail, by a fresh decoder, and written before what was decoded after it; answers whether it is. (A remote
   * engine's socket went with the thread: its failure keeps the audio instead.)
   */
  lost(): boolean {
    const tails = this.#tails;
    const decode = this.#o.decodeLost;
    if (!this.#redecode || tails === undefined || decode === undefined || this.#kept) return false;
    // One task is in flight per shard: everything that left before the lost one has come back, so the lost batch is
    // what the tail holds past what reached the session.
    const replay = Promise.all(tails.map(async (tail, ch) => {
      const from = this.#placed[ch]!;
      const to = tail.end;
      if (to <= from) return undefined;
      this.#placed[ch] = to;
      return this.#redecodePart(ch, from, to, tail.slice(from, to), decode);
    }));
    this.#queue.push({ replay });
    this.#delivering ??= this.#deliverQueued();
    return true;
  }

  async #redecodePart(ch: number, from: number, to: number, slice: EncodedSlice, decode: (messages: readonly Uint8Array[]) => Promise<Int16Array>): Promise<Int16Array | undefined> {
    let pcm: Int16Array = new Int16Array(0);
    try {
      if (slice.messages.length > 0) pcm = await decode(slice.messages);
    } catch (err) {
      this.#o.logger.error({ sessionId: this.#o.sessionId, channel: ch, err: { name: (err as Error)?.name } }, 'a lost batch could not be decoded again');
    }
    const part = pcm.subarray(Math.min(from - slice.startSample, pcm.length), Math.min(to - slice.startSample, pcm.length));
    if (part.length < to - from) this.#o.logger.warn({ sessionId: this.#o.sessionId, channel: ch, samples: to - from - part.length }, 'audio lost: a batch the codec lost was not decoded again');
    return part;
  }

  /** Delivers the queue in order, waiting for each lost batch's second decoding. */
  async #deliverQueued(): Promise<void> {
    while (this.#queue.length > 0) {
      const next = this.#queue[0]!;
      if ('replay' in next) (await next.replay).forEach((pcm, ch) => pcm && pcm.length > 0 && this.#deliver(ch, pcm));
      else this.#deliver(next.channel, next.pcm);
      this.#queue.shift();
    }
    this.#delivering = undefined;
  }

  /** Flushes what the engines hold (nothing to do after a failure: the audio is kept). */
  async finalize(): Promise<void> {
    await this.#delivering;
    if (this.#kept) return;
    await Promise.all(this.#streams.map((s) => s.finalize()));
  }

  /**
   * After a failure: hands each channel's kept audio to `keepAudio`, placed in the conversation `anchor` names (opened
   * if needed). Answers the seconds kept (0 when nothing failed or nothing was lost).
   */
  async keep(anchor: () => Promise<{ conversationId: string; offsetS: number }>, keepAudio: (meta: KeptAudioMeta, chunks: readonly Int16Array[]) => Promise<void>, who: { uid: string; sessionId: string; createdAtMs: number }): Promise<number> {
    await this.#delivering;
    const taken = this.takeKept();
    for (const k of taken) await this.#replay(k);
    const kept = taken.filter((k) => k.samples > 0);
    if (kept.length === 0) return 0;
    const { conversationId, offsetS } = await anchor();
    const o = this.#o;
    for (const k of kept) {
      await keepAudio({ ...who, conversationId, language: o.language, channel: k.channel, channels: o.channels, offsetS: offsetS + k.startS, sampleRateHz: SAMPLE_RATE }, k.chunks);
    }
    return kept.reduce((n, k) => n + k.samples, 0) / SAMPLE_RATE;
  }

  /** The audio kept since the failure, per channel with audio; empty when nothing failed or nothing was lost. */
  takeKept(): KeptChannel[] {
    this.#sliceTails();
    const kept = (this.#kept ?? []).filter((k) => k.samples > 0 || k.replay !== undefined);
    this.#kept = this.#kept?.map((k) => ({ channel: k.channel, startS: k.startS, chunks: [], samples: 0 }));
    return kept;
  }

  /**
   * Decodes a kept channel's encoded part into the front of its chunks, cut to exactly the unanswered samples. Audio
   * the bound had already dropped, or audio that cannot be decoded, is missing: `startS` then moves to where what
   * is kept begins.
   */
  async #replay(k: KeptChannel): Promise<void> {
    const r = k.replay;
    const decode = this.#o.decodeKept;
    k.replay = undefined;
    if (r === undefined) return;
    k.startS = r.to / SAMPLE_RATE;
    if (decode === undefined || r.messages.length === 0) return;
    let pcm: Int16Array;
    try {
      pcm = await decode(r.messages);
    } catch (err) {
      this.#o.logger.error({ sessionId: this.#o.sessionId, channel: k.channel, err: { name: (err as Error)?.name } }, 'kept audio could not be decoded');
      return;
    }
    const from = Math.max(r.from, r.startSample);
    const part = pcm.subarray(Math.min(from - r.startSample, pcm.length), Math.min(r.to - r.startSample, pcm.length));
    if (part.length === 0) return;
    k.startS = from / SAMPLE_RATE;
    k.chunks.unshift(part);
    k.samples += part.length;
  }

  /** Closes the streams and records the session's usage, once. */
  close(): void {
    for (const s of this.#streams) void s.close().catch(() => undefined);
    this.#streams = [];
    const u = this.#o.usage;
    const samples = this.#written.reduce((a, b) => a + b, 0) - this.#billed;
    if (u && this.provider && (samples > 0 || this.words > 0)) {
      u.recorder.record({ uid: u.uid, provider: this.provider, audioSeconds: samples / SAMPLE_RATE, words: this.words, at: u.now() });
      this.#billed += samples;
      this.words = 0;
    }
  }

  #fail(f: SttFailure, provider: string): void {
    if (this.#kept) return;
    // Every channel's stream goes down with the session: keep each one's audio after its last final result (local
    // engines, which cannot lose audio to a network, report none and keep nothing from before the failure).
    for (const tail of this.#tails ?? []) tail.keepAll();
    this.#kept = this.#streams.map((s, channel) => {
      const written = this.#written[channel]!;
      const acked = Math.min(s.acknowledgedSamples?.() ?? written, written);
      return { channel, startS: acked / SAMPLE_RATE, chunks: [], samples: 0 };
    });
    this.close();
    this.#o.onFailure(f, provider);
  }

  /**
   * The encoded audio each kept channel still needs from its tail: from its last acknowledgement to what was written,
   * read once the decoding in flight at the failure has come back (a codec shard may have sent some of it on the
   * failed socket meanwhile: uplinked() counted it). Frees the tails.
   */
  #sliceTails(): void {
    const tails = this.#tails;
    if (tails === undefined || this.#kept === undefined) return;
    this.#tails = undefined;
    this.#o.codec?.keepEncoded(undefined);
    for (const k of this.#kept) {
      const acked = Math.round(k.startS * SAMPLE_RATE);
      const written = this.#written[k.channel]!;
      const slice = acked < written ? tails[k.channel]?.slice(acked, written) : undefined;
      if (slice) k.replay = { ...slice, from: acked, to: written };
    }
  }
}
