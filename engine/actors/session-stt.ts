// A session's speech side: opens one stream per channel with fail-over, routes PCM to them, and when a stream fails
// keeps every sample no engine acknowledged (the stream's unacknowledged tail plus whatever is still being decoded).
import type { Logger } from '../logger.js';
import type { Scheduler } from '../scheduler.js';
import { Outcome } from '../protocol.js';
import type { SttRegistry } from '../stt/registry.js';
import { openStreams } from '../stt/failover.js';
import type { SttFailure, SttSegment, SttStream } from '../stt/types.js';
import type { KeptAudioMeta } from '../stt/kept-audio.js';
import { countWords, type UsageRecorder } from '../usage.js';

export interface SessionSttOptions {
  registry: SttRegistry;
  language: string;
  sttService: string | null;
  channels: number;
  sessionId: string;
  scheduler: Scheduler;
  logger: Logger;
  /** Seconds of audio and words transcribed are recorded here (per user, provider, day) when the streams close. */
  usage?: { recorder: UsageRecorder; uid: string; now: () => number };
  onSegments(segments: SttSegment[], provider: string, channel: number): void;
  onFailure(failure: SttFailure, provider: string): void;
}

/** Audio of one channel no engine answered for: from `startS` seconds of the stream. */
export interface KeptChannel {
  channel: number;
  startS: number;
  chunks: Int16Array[];
  samples: number;
}

const SAMPLE_RATE = 16000;

export class SessionStt {
  readonly #o: SessionSttOptions;
  #streams: SttStream[] = [];
  /** Samples written per channel since the stream began (stream time). */
  readonly #written: number[];
  /** Set once a stream failed: PCM goes here instead of to the engines. */
  #kept: KeptChannel[] | undefined;
  provider: string | undefined;
  fallbackFrom: string | undefined;
  /** Words in the engines' segments so far (usage). */
  words = 0;

  constructor(opts: SessionSttOptions) {
    this.#o = opts;
    this.#written = new Array<number>(opts.channels).fill(0);
  }

  get failed(): boolean {
    return this.#kept !== undefined;
  }

  /**
   * Opens the streams. Resolves 'ok', 'cancelled' (the client left first), or the failure to report (stt_failed):
   * no eligible engine is a config_error (fail closed, SPEC Errors rule 2).
   */
  async open(signal: AbortSignal): Promise<'ok' | 'cancelled' | { failure: SttFailure; provider: string }> {
    const o = this.#o;
    const engines = o.registry.candidates(o.language, o.sttService);
    if (engines.length === 0) return { failure: { outcome: Outcome.CONFIG_ERROR, retryable: false, reason: 'language_not_supported' }, provider: 'none' };
    const r = await openStreams({
      engines,
      channels: o.channels,
      stream: { language: o.language, sampleRateHz: SAMPLE_RATE, sessionId: o.sessionId },
      scheduler: o.scheduler,
      signal,
      onAttemptFailed: (engine, attempt, f) => o.logger.warn({ sessionId: o.sessionId, engine, attempt, reason: f.reason }, 'speech provider did not open'),
    });
    if (!r.ok) return r.cancelled ? 'cancelled' : { failure: r.failure, provider: r.provider };
    this.provider = r.engine.name;
    this.fallbackFrom = r.fallbackFrom;
    this.#streams = r.streams;
    r.streams.forEach((s, ch) => {
      s.on('segments', (segs) => {
        if (this.#kept) return;
        for (const x of segs) this.words += countWords(x.text, o.language);
        o.onSegments(segs, s.provider, ch);
      });
      s.on('failure', (f) => this.#fail(f, s.provider));
    });
    return 'ok';
  }

  /** PCM of `channel`; after a failure it is kept instead. */
  write(channel: number, pcm: Int16Array): void {
    const ch = Math.min(channel, this.#o.channels - 1);
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
  }

  /** Flushes what the engines hold (nothing to do after a failure: the audio is kept). */
  async finalize(): Promise<void> {
    if (this.#kept) return;
    await Promise.all(this.#streams.map((s) => s.finalize()));
  }

  /**
   * After a failure: hands each channel's kept audio to `keepAudio`, placed in the conversation `anchor` names (opened
   * if needed). Answers the seconds kept (0 when nothing failed or nothing was lost).
   */
  async keep(anchor: () => Promise<{ conversationId: string; offsetS: number }>, keepAudio: (meta: KeptAudioMeta, chunks: readonly Int16Array[]) => Promise<void>, who: { uid: string; sessionId: string; createdAtMs: number }): Promise<number> {
    const kept = this.takeKept();
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
    const kept = (this.#kept ?? []).filter((k) => k.samples > 0);
    this.#kept = this.#kept?.map((k) => ({ ...k, chunks: [], samples: 0 }));
    return kept;
  }

  /** Closes the streams and records the session's usage, once. */
  close(): void {
    for (const s of this.#streams) void s.close().catch(() => undefined);
    this.#streams = [];
    const u = this.#o.usage;
    const samples = this.#written.reduce((a, b) => a + b, 0);
    if (u && this.provider && (samples > 0 || this.words > 0)) {
      u.recorder.record({ uid: u.uid, provider: this.provider, audioSeconds: samples / SAMPLE_RATE, words: this.words, at: u.now() });
      this.#written.fill(0);
      this.words = 0;
    }
  }

  #fail(f: SttFailure, provider: string): void {
    if (this.#kept) return;
    // Every channel's stream goes down with the session: keep each one's unacknowledged tail (local engines, which
    // cannot lose audio to a network, give none).
    this.#kept = this.#streams.map((s, channel) => {
      const u = s.unacknowledged?.();
      const startS = u ? u.startS : this.#written[channel]! / SAMPLE_RATE;
      return { channel, startS, chunks: u && u.pcm.length > 0 ? [u.pcm] : [], samples: u?.pcm.length ?? 0 };
    });
    this.close();
    this.#o.onFailure(f, provider);
  }
}
