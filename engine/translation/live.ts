// What a listen node gives its `language=multi` sessions: a SessionTranslation into the user's language, and the
// `translation` field of their `ready` message (on with its language, or off and why).
import type { Clock } from '../clock.js';
import type { Logger } from '../logger.js';
import type { Scheduler } from '../scheduler.js';
import { SessionTranslation, type TranslationStore } from './session-translation.js';
import type { Translator } from './translator.js';

/** The target when the user saved no language and the session's own is `multi`, which names none. */
export const DEFAULT_TARGET = 'en';

/** The session language that turns translation on. */
export const TRANSLATED_LANGUAGE = 'multi';

/** `ready`'s `translation` field. */
export type ReadyTranslation = { enabled: true; language: string } | { enabled: false; reason: 'llm_not_configured' };

export const TRANSLATION_OFF: ReadyTranslation = { enabled: false, reason: 'llm_not_configured' };

export interface LiveTranslationOptions {
  readonly translator: Translator;
  /** The user's saved settings: their language is the target. */
  readonly settings: { get(uid: string): Promise<{ language: string | null }> };
  readonly store: TranslationStore;
  readonly scheduler: Scheduler;
  readonly clock: Clock;
  readonly logger: Logger;
}

export class LiveTranslation {
  readonly #o: LiveTranslationOptions;

  constructor(o: LiveTranslationOptions) {
    this.#o = o;
  }

  /** A session's translation into the user's saved language, else DEFAULT_TARGET. */
  async open(uid: string, sessionId: string, send: (text: string) => void): Promise<SessionTranslation> {
    const { language } = await this.#o.settings.get(uid);
    const o = this.#o;
    return new SessionTranslation({ translator: o.translator, target: language ?? DEFAULT_TARGET, sessionId, store: o.store, scheduler: o.scheduler, clock: o.clock, logger: o.logger, send });
  }
}
