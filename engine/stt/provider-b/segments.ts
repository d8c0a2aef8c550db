// Turns provider_b final tokens into segments: speaker labels, cuts on speaker change, a 3 s gap, endpoints and size.
import type { ProviderBToken } from './protocol.js';
import type { SttSegment } from '../types.js';

const GAP_S = 3;
const MAX_CHARS = 4096;
const SENTENCE_END = /[.?!]\s*$/;
const MIN_SENTENCE_S = 0.3;

interface Pending {
  speaker: string;
  start: number;
  end: number;
  text: string;
  words: { word: string; start: number; end: number }[];
}

export interface PushResult {
  /** Segments completed by these tokens, in order. */
  segments: SttSegment[];
  /** `<fin>` markers among them (answers to finalize). */
  fins: number;
}

/** Speakers arrive numbered from 1 ("1", "2"); labels count from 0, as the compatible system's do: "1" → SPEAKER_00. */
export function speakerLabel(speaker: unknown): string {
  const n = typeof speaker === 'string' || typeof speaker === 'number' ? Number.parseInt(String(speaker), 10) : Number.NaN;
  const index = Number.isFinite(n) ? Math.max(n - 1, 0) : 0;
  return `SPEAKER_${String(index).padStart(2, '0')}`;
}

/**
 * Tokens are sub-word pieces ("fan", "tastic"; a leading space starts a word). Only final tokens count: non-final ones
 * may still change. A segment stays open until something cuts it: a different speaker, a gap of 3 s or more, an
 * `<end>`/`<fin>` marker, 4096 characters, or a message whose final tokens end a sentence (. ? !) more than 0.3 s after
 * the segment began (so a speaker who never pauses is still heard sentence by sentence), or the stream ends (flush()).
 * A word is never split across segments.
 */
export class TokenSegmenter {
  #pending: Pending | null = null;

  /** Feeds one message's tokens. */
  push(tokens: readonly ProviderBToken[]): PushResult {
    const segments: SttSegment[] = [];
    let fins = 0;
    for (const token of tokens) {
      if (token.is_final !== true || typeof token.text !== 'string') continue;
      const text = token.text;
      if (text === '<end>' || text === '<fin>') {
        this.#cut(segments);
        if (text === '<fin>') fins++;
        continue;
      }
      if (token.translation_status === 'translation') continue;
      if (typeof token.start_ms !== 'number' || typeof token.end_ms !== 'number' || text === '') continue;
      const start = token.start_ms / 1000;
      const end = Math.max(start, token.end_ms / 1000);
      const speaker = speakerLabel(token.speaker);
      const p = this.#pending;
      if (p && (p.speaker !== speaker || start - p.end >= GAP_S || p.text.length + text.length > MAX_CHARS)) this.#cut(segments);
      this.#append(text, speaker, start, end);
    }
    const p = this.#pending;
    if (p && SENTENCE_END.test(p.text) && p.end - p.start > MIN_SENTENCE_S) this.#cut(segments);
    return { segments, fins };
  }

  /** Completes the segment in progress (end of audio, failure, close). */
  flush(): SttSegment[] {
    const segments: SttSegment[] = [];
    this.#cut(segments);
    return segments;
  }

  #append(text: string, speaker: string, start: number, end: number): void {
    const word = text.trim();
    let p = this.#pending;
    if (!p) {
      if (word === '') return; // whitespace never opens a segment
      p = this.#pending = { speaker, start, end, text: '', words: [] };
    }
    p.text += text;
    p.end = Math.max(p.end, end);
    if (word === '') return;
    const last = p.words[p.words.length - 1];
    if (last && !/^\s/.test(text)) {
      last.word += word;
      last.end = Math.max(last.end, end);
    } else {
      p.words.push({ word, start, end });
    }
  }

  #cut(into: SttSegment[]): void {
    const p = this.#pending;
    this.#pending = null;
    if (!p) return;
    const text = p.text.trim();
    if (text !== '') into.push({ text, speaker: p.speaker, start: p.start, end: p.end, words: p.words });
  }
}
