// provider_a's pure protocol pieces (Deepgram live `/v1/listen`): the query, Results → segments, and how errors map to failures.
import { Outcome } from '../../protocol.js';
import type { SttFailure, SttSegment } from '../types.js';

export const SAMPLE_RATE_HZ = 16000;

/** Most vocabulary terms sent: a user's vocabulary holds up to 100. */
export const MAX_KEYTERMS = 100;

/**
 * The listen URL with the options the compatible system streams with. Built by hand so spaces in key terms are `%20`, never `+`.
 * Parameters already on `base` (a self-hosted deployment's own) are kept unless they are ones set here.
 */
export function listenUrl(base: string, model: string, language: string, keyterms: readonly string[]): string {
  const url = new URL(base);
  const params: [string, string][] = [
    ['model', model],
    ['language', language],
    ['encoding', 'linear16'],
    ['sample_rate', String(SAMPLE_RATE_HZ)],
    ['channels', '1'],
    ['multichannel', 'false'],
    ['punctuate', 'true'],
    ['smart_format', 'true'],
    ['diarize', 'true'],
    ['no_delay', 'true'],
    ['endpointing', '300'],
    ['interim_results', 'false'],
    ['profanity_filter', 'false'],
    ['filler_words', 'false'],
  ];
  // Nova-3 takes `keyterm`; older models take `keywords` (Nova-3 refuses `keywords` with a 400).
  const vocab = model === 'nova-3' || model.startsWith('nova-3-') ? 'keyterm' : 'keywords';
  for (const term of keyterms) params.push([vocab, term]);
  const ours = new Set(params.map(([k]) => k));
  const kept = [...url.searchParams].filter(([k]) => !ours.has(k));
  url.search = '';
  const enc = encodeURIComponent;
  return `${url.toString()}?${[...kept, ...params].map(([k, v]) => `${enc(k)}=${enc(v)}`).join('&')}`;
}

/** Trimmed, de-duplicated, at most MAX_KEYTERMS. */
export function cleanKeyterms(terms: readonly string[] | undefined): string[] {
  const seen = new Set<string>();
  for (const t of terms ?? []) {
    const v = t.trim();
    if (v && !seen.has(v) && seen.size < MAX_KEYTERMS) seen.add(v);
  }
  return [...seen];
}

interface DgWord {
  word: string;
  punctuated_word?: string;
  start: number;
  end: number;
  speaker?: number;
}

/** The fields of a Deepgram `Results` message the client reads. */
export interface DgResults {
  type: 'Results';
  start: number;
  duration: number;
  is_final?: boolean;
  from_finalize?: boolean;
  channel?: { alternatives?: { transcript?: string; words?: DgWord[] }[] };
}

/** Words grouped by consecutive speaker, as the compatible system groups them; an empty transcript gives no segments. */
export function segmentsOf(r: DgResults): SttSegment[] {
  const alt = r.channel?.alternatives?.[0];
  if (!alt || !alt.transcript?.trim() || !alt.words?.length) return [];
  const out: (SttSegment & { words: NonNullable<SttSegment['words']> })[] = [];
  for (const w of alt.words) {
    const speaker = `SPEAKER_${String(w.speaker ?? 0).padStart(2, '0')}`;
    const text = w.punctuated_word ?? w.word;
    let seg = out[out.length - 1];
    if (!seg || seg.speaker !== speaker) {
      seg = { speaker, text, start: w.start, end: w.end, words: [] };
      out.push(seg);
    } else {
      seg.text += ` ${text}`;
      seg.end = w.end;
    }
    seg.words.push({ word: text, start: w.start, end: w.end });
  }
  return out;
}

/** The failure for a refused handshake (`status`) or one that never completed (undefined: refused, reset, timeout). */
export function openFailure(status: number | undefined): SttFailure {
  if (status === 401 || status === 403) return { outcome: Outcome.CONFIG_ERROR, retryable: false, reason: 'provider_auth' };
  if (status === 402) return { outcome: Outcome.CONFIG_ERROR, retryable: false, reason: 'provider_budget' };
  if (status === 429) return { outcome: Outcome.UPSTREAM_ERROR, retryable: true, reason: 'provider_rate_limited' };
  if (status !== undefined && status >= 500) return { outcome: Outcome.UPSTREAM_ERROR, retryable: true, reason: 'provider_5xx' };
  // 400 and other 4xx: Deepgram refused our options (e.g. a language the model does not serve). Retrying cannot help.
  if (status !== undefined) return { outcome: Outcome.CONFIG_ERROR, retryable: false, reason: 'provider_rejected_request' };
  return { outcome: Outcome.UPSTREAM_ERROR, retryable: true, reason: 'initialization_failed' };
}

/**
 * The failure for a socket closed while streaming. Deepgram closes with 1011 `NET-0001` after 10 s without audio or
 * text, 1011 `NET-0000` when it has not answered in time, and 1002/1008 `DATA-0000` for undecodable audio; anything
 * else (including no close frame: 1006) is a lost connection.
 */
export function streamFailure(code: number, reason: string): SttFailure {
  if (reason.startsWith('NET-0001')) return { outcome: Outcome.UPSTREAM_ERROR, retryable: true, reason: 'provider_idle_timeout' };
  if (reason.startsWith('DATA-')) return { outcome: Outcome.UPSTREAM_ERROR, retryable: true, reason: 'provider_invalid_audio' };
  return { outcome: Outcome.UPSTREAM_ERROR, retryable: true, reason: code === 1011 && reason !== '' ? 'provider_5xx' : 'connection_lost' };
}

/** Retry-After in milliseconds: delta-seconds or an HTTP date (RFC 9110 §10.2.3); undefined when absent or unreadable. */
export function retryAfterMs(value: string | undefined, nowMs: number): number | undefined {
  if (value === undefined) return undefined;
  const v = value.trim();
  if (/^\d+$/.test(v)) return Number(v) * 1000;
  const at = Date.parse(v);
  return Number.isNaN(at) ? undefined : Math.max(0, at - nowMs);
}
