// Usage accounting: seconds of audio and words transcribed per user, UTC day and provider, into the store and as metrics.
// record() never waits (session teardown calls it); one write at a time carries all since the last, and a failed one retries.
import client from 'prom-client';
import type { Logger } from '../logger.js';
import { utcDay } from '../db/store.js';
import type { UsageIncrement, UsageRepository } from '../db/usage.js';

export interface UsageRecord {
  uid: string;
  /** Engine that transcribed, as in segments' `stt_provider` (provider_a, provider_b, local, custom). */
  provider: string;
  /** Seconds of audio the provider received. */
  audioSeconds: number;
  /** Words in the final transcript. */
  words: number;
  /** When the usage happened, epoch ms: its UTC day gets the amounts. */
  at: number;
}

export interface UsageRecorderOptions {
  repository: UsageRepository;
  /** The service's metrics registry (served at /metrics). */
  registry: client.Registry;
  logger: Logger;
  /** Distinct (user, day, provider) rows held while the store fails; past it new rows are dropped and counted. @defaultValue 100000 */
  maxPendingRows?: number;
}

/** Languages written without spaces between words: counted with the ICU word segmenter instead of by spaces. */
const UNSPACED = new Set(['zh', 'ja', 'th', 'lo', 'km', 'my']);
const segmenters = new Map<string, Intl.Segmenter>();

/**
 * Words in a transcript text, as usage counts them: runs of non-space characters, or for Chinese, Japanese, Thai, Lao,
 * Khmer and Burmese (`language` such as `ja` or `zh-TW`) the word-like pieces of the ICU segmenter.
 */
export function countWords(text: string, language = 'en'): number {
  const base = language.split('-')[0]!.toLowerCase();
  if (!UNSPACED.has(base)) return text.match(/\S+/g)?.length ?? 0;
  let seg = segmenters.get(base);
  if (!seg) segmenters.set(base, (seg = new Intl.Segmenter(base, { granularity: 'word' })));
  let n = 0;
  for (const piece of seg.segment(text)) if (piece.isWordLike) n++;
  return n;
}

/** Longest provider name stored (the column is 32 characters). */
const MAX_PROVIDER_CHARS = 32;
const MAX_UID_CHARS = 128;

/** Why a record is refused, or undefined. Field names only: values may be personal data. */
function problem(r: UsageRecord): string | undefined {
  if (typeof r.uid !== 'string' || r.uid === '' || r.uid.length > MAX_UID_CHARS) return 'uid';
  if (typeof r.provider !== 'string' || r.provider === '' || r.provider.length > MAX_PROVIDER_CHARS) return 'provider';
  if (!Number.isFinite(r.audioSeconds) || r.audioSeconds < 0) return 'audioSeconds';
  if (!Number.isSafeInteger(r.words) || r.words < 0) return 'words';
  if (!Number.isFinite(r.at)) return 'at';
  return undefined;
}

/**
 * A burst of session ends becomes one upsert; a failed write keeps its rows for the next record(), flush() or close(),
 * so a store outage delays usage instead of losing it (up to maxPendingRows).
 */
export class UsageRecorder {
  readonly #o: UsageRecorderOptions;
  readonly #maxPendingRows: number;
  readonly #audioSeconds: client.Counter<'provider'>;
  readonly #words: client.Counter<'provider'>;
  #pending = new Map<string, UsageIncrement>();
  #writing: Promise<void> | undefined;
  /** Records refused as malformed, and records dropped because too many rows waited for the store. */
  readonly stats = { refused: 0, dropped: 0, writes: 0, failedWrites: 0 };

  constructor(opts: UsageRecorderOptions) {
    this.#o = opts;
    this.#maxPendingRows = opts.maxPendingRows ?? 100_000;
    this.#audioSeconds = new client.Counter({
      name: 'stt_audio_seconds_total',
      help: 'Seconds of audio sent to speech-to-text, by provider.',
      labelNames: ['provider'],
      registers: [opts.registry],
    });
    this.#words = new client.Counter({
      name: 'stt_words_total',
      help: 'Words transcribed by speech-to-text, by provider.',
      labelNames: ['provider'],
      registers: [opts.registry],
    });
  }

  /** Rows waiting for the store. */
  get pendingRows(): number {
    return this.#pending.size;
  }

  /** Counts usage now (metrics) and queues it for the store; never throws, never waits. */
  record(r: UsageRecord): void {
    const bad = problem(r);
    if (bad) {
      this.stats.refused++;
      this.#o.logger.warn({ field: bad }, 'usage record refused');
      return;
    }
    if (r.audioSeconds === 0 && r.words === 0) return;
    this.#audioSeconds.inc({ provider: r.provider }, r.audioSeconds);
    this.#words.inc({ provider: r.provider }, r.words);
    const day = utcDay(r.at);
    const key = `${r.uid}\u0000${day}\u0000${r.provider}`;
    const row = this.#pending.get(key);
    if (row) {
      row.audioSeconds += r.audioSeconds;
      row.words += r.words;
    } else if (this.#pending.size >= this.#maxPendingRows) {
      this.stats.dropped++;
      if (this.stats.dropped === 1 || this.stats.dropped % 1000 === 0) this.#o.logger.error({ dropped: this.stats.dropped }, 'usage dropped: the store has not accepted writes');
      return;
    } else {
      this.#pending.set(key, { uid: r.uid, day, provider: r.provider, audioSeconds: r.audioSeconds, words: r.words });
    }
    this.#writing ??= this.#write();
  }

  /** Resolves once everything recorded so far is in the store; rejects when the store refused it (the rows stay queued). */
  async flush(): Promise<void> {
    await this.#writing;
    if (this.#pending.size === 0) return;
    this.#writing ??= this.#write();
    await this.#writing;
    if (this.#pending.size > 0) throw new Error('usage could not be written to the store');
  }

  /** Writes what is queued (shutdown); a store failure is logged, not thrown. */
  async close(): Promise<void> {
    await this.flush().catch(() => this.#o.logger.error({ rows: this.#pending.size }, 'usage lost at shutdown: the store refused it'));
  }

  async #write(): Promise<void> {
    // Let the records of the current turn join this write.
    await Promise.resolve();
    try {
      while (this.#pending.size > 0) {
        const batch = this.#pending;
        this.#pending = new Map();
        try {
          await this.#o.repository.add([...batch.values()]);
          this.stats.writes++;
        } catch (err) {
          this.stats.failedWrites++;
          this.#o.logger.error({ rows: batch.size, err: { name: (err as Error)?.name } }, 'usage write failed; kept for the next attempt');
          this.#requeue(batch);
          return;
        }
      }
    } finally {
      this.#writing = undefined;
    }
  }

  /** Puts a failed batch back, merged with what was recorded meanwhile. */
  #requeue(batch: Map<string, UsageIncrement>): void {
    for (const [key, row] of batch) {
      const newer = this.#pending.get(key);
      if (newer) {
        newer.audioSeconds += row.audioSeconds;
        newer.words += row.words;
      } else {
        this.#pending.set(key, row);
      }
    }
  }
}
