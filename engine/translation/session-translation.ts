// One `language=multi` session's translations: segments debounced while they grow, sentences looked up in the node's
// cache, one model request in flight at a time, bounded retries, the result stored on the segment and sent.
import type { Clock } from '../clock.js';
import type { Logger } from '../logger.js';
import type { Scheduler, TimerId } from '../scheduler.js';
import type { SegmentTranslation } from '../db/conversations.js';
import type { TranscriptSegment } from '../audio/segment.js';
import { sentences } from '../audio/segments.js';
import { ListenMessage } from '../protocol.js';
import { detectLanguage, primaryLanguage } from './detect.js';
import { TranslationError, type SentenceAnswer, type Translator } from './translator.js';

/** A segment is translated once its text has not changed for this long (the compatible system's 1.0 s). */
export const DEBOUNCE_MS = 1_000;
/** A segment that keeps growing (someone talking without a pause) is translated this long after it first changed. */
export const MAX_WAIT_MS = 4_000;
/** Waits before the second and third try of a failed request; after the last the segment is skipped. */
export const RETRY_MS = [2_000, 5_000] as const;
/** Segments a session follows (the latest ones: merges only ever touch the newest stored segment). */
export const MAX_SEGMENTS = 64;
/** Sentences in one request; more wait for the next. Keeps a request's answer quick and its size bounded. */
export const MAX_SENTENCES_PER_REQUEST = 32;

/** Where translations are stored: only while the segment still has the text that was translated. */
export interface TranslationStore {
  updateSegmentTranslations(conversationId: string, items: readonly { id: string; text: string; translations: readonly SegmentTranslation[] }[]): Promise<number>;
}

export interface SessionTranslationOptions {
  readonly translator: Translator;
  /** The language translations are made into, a BCP 47 tag. */
  readonly target: string;
  readonly sessionId: string;
  readonly store: TranslationStore;
  readonly scheduler: Scheduler;
  readonly clock: Clock;
  readonly logger: Logger;
  /** Sends one text frame to the session's client. */
  readonly send: (text: string) => void;
}

interface Followed {
  id: string;
  conversationId: string;
  text: string;
  /** When the text last changed, and when it first changed since it was last decided (ms). */
  changedAtMs: number;
  firstChangedAtMs: number;
  /** Waiting to be translated; false once decided (translated, same language, or skipped). */
  pending: boolean;
  /** Failed tries for the current text, and the earliest time of the next one. */
  attempts: number;
  retryAtMs: number;
  /** The text last decided and its translation (null: it was in the target language). */
  decided?: { text: string; translation: string | null };
}

/** Scripts written without spaces between sentences. */
const NO_SPACE_TARGETS = new Set(['zh', 'ja', 'th']);

export class SessionTranslation {
  readonly #o: SessionTranslationOptions;
  readonly #targetPrimary: string;
  readonly #joiner: string;
  readonly #segments = new Map<string, Followed>();
  readonly #abort = new AbortController();
  #timer: TimerId | undefined;
  #timerAtMs = Infinity;
  /** The round in progress (one model request at most). */
  #round: Promise<void> | undefined;
  #disposed = false;

  constructor(o: SessionTranslationOptions) {
    this.#o = o;
    this.#targetPrimary = primaryLanguage(o.target);
    this.#joiner = NO_SPACE_TARGETS.has(this.#targetPrimary) ? '' : ' ';
  }

  get target(): string {
    return this.#o.target;
  }

  /** Segments a step stored and sent (new or changed) in `conversationId`. */
  segments(conversationId: string, updated: readonly TranscriptSegment[]): void {
    if (this.#disposed) return;
    const now = this.#o.clock.now();
    const restore: { id: string; text: string; translations: SegmentTranslation[] }[] = [];
    for (const s of updated) {
      const f = this.#segments.get(s.id);
      if (f && f.text === s.text) {
        // Same text: the step rewrote the row (new times) or changed its speaker. The row lost its translation only
        // in the first case, but writing it again is cheaper than telling the two apart.
        if (!f.pending && f.decided?.text === s.text && f.decided.translation !== null) restore.push({ id: s.id, text: s.text, translations: [{ lang: this.#o.target, text: f.decided.translation }] });
        continue;
      }
      if (f) {
        this.#segments.delete(s.id); // re-inserted last: the Map's order is the order of change
        if (!f.pending) f.firstChangedAtMs = now;
        Object.assign(f, { conversationId, text: s.text, changedAtMs: now, pending: true, attempts: 0, retryAtMs: 0 });
        this.#segments.set(s.id, f);
      } else {
        this.#segments.set(s.id, { id: s.id, conversationId, text: s.text, changedAtMs: now, firstChangedAtMs: now, pending: true, attempts: 0, retryAtMs: 0 });
      }
    }
    this.#bound();
    if (restore.length > 0) void this.#store(conversationId, restore);
    this.#arm();
  }

  /** Translates what waits now, without the debounce, and resolves when that round is done (the session's drain). */
  async finish(): Promise<void> {
    await this.#round;
    if (this.#disposed) return;
    for (const f of this.#segments.values()) if (f.pending) [f.changedAtMs, f.firstChangedAtMs, f.retryAtMs] = [-Infinity, -Infinity, 0];
    this.#cancelTimer();
    await this.#run();
  }

  dispose(): void {
    if (this.#disposed) return;
    this.#disposed = true;
    this.#cancelTimer();
    this.#abort.abort();
    this.#segments.clear();
  }

  /** Past MAX_SEGMENTS the oldest is forgotten; one still waiting is counted as dropped. */
  #bound(): void {
    while (this.#segments.size > MAX_SEGMENTS) {
      const [id, f] = this.#segments.entries().next().value!;
      this.#segments.delete(id);
      if (f.pending) this.#o.translator.counters.segment('dropped');
    }
  }

  #dueAt(f: Followed): number {
    return Math.max(Math.min(f.changedAtMs + DEBOUNCE_MS, f.firstChangedAtMs + MAX_WAIT_MS), f.retryAtMs);
  }

  /** One timer for the earliest due segment; none while a round runs (it arms again when done). */
  #arm(): void {
    if (this.#disposed || this.#round) return;
    let at = Infinity;
    for (const f of this.#segments.values()) if (f.pending) at = Math.min(at, this.#dueAt(f));
    if (at === this.#timerAtMs) return;
    this.#cancelTimer();
    if (at === Infinity) return;
    this.#timerAtMs = at;
    this.#timer = this.#o.scheduler.schedule(at, () => {
      this.#timer = undefined;
      this.#timerAtMs = Infinity;
      // Not returned: a scheduler tick must not wait on the model.
      void this.#run();
    });
  }

  #cancelTimer(): void {
    this.#o.scheduler.cancel(this.#timer);
    this.#timer = undefined;
    this.#timerAtMs = Infinity;
  }

  #run(): Promise<void> {
    if (this.#round || this.#disposed) return this.#round ?? Promise.resolve();
    const round = this.#roundOnce()
      .catch((err: unknown) => this.#o.logger.error({ sessionId: this.#o.sessionId, err: { name: (err as Error)?.name } }, 'translation round failed'))
      .finally(() => {
        this.#round = undefined;
        this.#arm();
      });
    this.#round = round;
    return round;
  }

  /** Decides every due segment: same language, from the cache, or through one model request for the sentences left. */
  async #roundOnce(): Promise<void> {
    const { translator, target } = this.#o;
    const now = this.#o.clock.now();
    const due: { f: Followed; text: string; parts: string[] }[] = [];
    const ask: string[] = [];
    const asked = new Set<string>();
    for (const f of this.#segments.values()) {
      if (!f.pending || this.#dueAt(f) > now) continue;
      const detected = detectLanguage(f.text);
      if (detected !== undefined && primaryLanguage(detected) === this.#targetPrimary) {
        this.#decide(f, f.text, null);
        continue;
      }
      const parts = sentences(f.text);
      const missing = parts.filter((p) => translator.cached(target, p) === undefined && !asked.has(p));
      if (ask.length > 0 && ask.length + missing.length > MAX_SENTENCES_PER_REQUEST) continue; // the next round
      for (const p of parts) translator.counters.sentence(missing.includes(p) ? 'model' : 'cache');
      for (const p of missing) {
        asked.add(p);
        ask.push(p);
      }
      due.push({ f, text: f.text, parts });
    }
    if (due.length === 0) return;
    let fresh: Map<string, SentenceAnswer> | undefined;
    if (ask.length > 0) {
      try {
        const answers = await translator.translate(ask, target, this.#abort.signal);
        fresh = new Map(ask.map((s, i) => [s, answers[i]!]));
      } catch (err) {
        if (this.#disposed) return;
        if (!(err instanceof TranslationError)) throw err;
        this.#failed(due.map((d) => d.f));
        return;
      }
    }
    if (this.#disposed) return;
    const out: { f: Followed; translation: string }[] = [];
    for (const { f, text, parts } of due) {
      // Changed while the model answered: its new text goes round again, mostly from the cache.
      if (f.text !== text) continue;
      const answers = parts.map((p) => fresh?.get(p) ?? translator.cached(target, p) ?? null);
      if (answers.every((a) => a === null)) {
        this.#decide(f, text, null);
        continue;
      }
      const translation = answers.map((a, i) => a ?? parts[i]!).join(this.#joiner);
      this.#decide(f, text, translation);
      out.push({ f, translation });
    }
    if (out.length === 0) return;
    const lang = target;
    this.#o.send(JSON.stringify({ type: ListenMessage.TRANSLATION, segments: out.map(({ f, translation }) => ({ id: f.id, translations: [{ lang, text: translation }] })) }));
    const byConversation = new Map<string, { id: string; text: string; translations: SegmentTranslation[] }[]>();
    for (const { f, translation } of out) {
      const list = byConversation.get(f.conversationId) ?? [];
      list.push({ id: f.id, text: f.text, translations: [{ lang, text: translation }] });
      byConversation.set(f.conversationId, list);
    }
    for (const [conversationId, items] of byConversation) await this.#store(conversationId, items);
  }

  #decide(f: Followed, text: string, translation: string | null): void {
    f.pending = false;
    f.decided = { text, translation };
    this.#o.translator.counters.segment(translation === null ? 'same_language' : 'translated');
  }

  /** A failed request: each of its segments tries again later, or is given up on after its last try. */
  #failed(segments: readonly Followed[]): void {
    const now = this.#o.clock.now();
    let skipped = 0;
    for (const f of segments) {
      const wait = RETRY_MS[f.attempts];
      f.attempts++;
      if (wait === undefined) {
        f.pending = false;
        skipped++;
      } else f.retryAtMs = now + wait;
    }
    if (skipped > 0) {
      this.#o.translator.counters.segment('skipped', skipped);
      this.#o.logger.warn({ sessionId: this.#o.sessionId, skipped }, 'segments left untranslated: the model failed at every try');
    }
  }

  async #store(conversationId: string, items: { id: string; text: string; translations: SegmentTranslation[] }[]): Promise<void> {
    try {
      await this.#o.store.updateSegmentTranslations(conversationId, items);
    } catch (err) {
      // The client has the translation; the stored transcript goes without it.
      this.#o.logger.error({ sessionId: this.#o.sessionId, conversationId, err: { name: (err as Error)?.name } }, 'storing translations failed');
    }
  }
}
