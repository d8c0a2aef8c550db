// The provider_b wire protocol (Soniox realtime WebSocket API): config frame, server messages, languages, errors → failures.
// Refusals and error frames are mapped here, once, onto the bounded reason vocabulary of `stt_failed`.
import { Outcome } from '../../protocol.js';
import type { SttFailure } from '../types.js';

/** The provider's documented language codes (ISO 639-1); region suffixes are ignored, `multi` means identification. */
export const PROVIDER_B_LANGUAGES: ReadonlySet<string> = new Set(
  ('af sq ar az eu be bn bs bg ca zh hr cs da nl en et fi fr gl de el gu he hi hu id it ja kn kk ko lv lt mk ms ml mr ' +
    'no fa pl pt pa ro ru sr sk sl es sw sv tl ta te th tr uk ur vi cy').split(' '),
);

/** `en-US` → `en`. */
export function baseLanguage(language: string): string {
  return language.split(/[-_]/)[0]!.toLowerCase();
}

/** The first text frame of a stream. */
export interface ProviderBConfigFrame {
  api_key: string;
  model: string;
  audio_format: 'pcm_s16le';
  sample_rate: number;
  num_channels: 1;
  enable_speaker_diarization: true;
  enable_language_identification: true;
  /** Endpoint detection makes the provider emit `<end>` after each utterance, which cuts segments promptly. */
  enable_endpoint_detection: true;
  /** Left out for `multi`: an explicit hint outside the list is a 400 at the config frame. */
  language_hints?: string[];
}

export function configFrame(apiKey: string, model: string, language: string, sampleRateHz: number): ProviderBConfigFrame {
  const frame: ProviderBConfigFrame = {
    api_key: apiKey,
    model,
    audio_format: 'pcm_s16le',
    sample_rate: sampleRateHz,
    num_channels: 1,
    enable_speaker_diarization: true,
    enable_language_identification: true,
    enable_endpoint_detection: true,
  };
  if (language !== 'multi') frame.language_hints = [baseLanguage(language)];
  return frame;
}

/** One token as the provider sends it; every field is checked before use. */
export interface ProviderBToken {
  text?: unknown;
  start_ms?: unknown;
  end_ms?: unknown;
  is_final?: unknown;
  /** "1", "2", … when diarization is on. */
  speaker?: unknown;
  translation_status?: unknown;
}

/** A server message: a result (tokens, progress, `finished`) or an error frame. */
export interface ProviderBMessage {
  tokens?: unknown;
  /** Audio before this point (ms from stream start) is covered by final tokens. */
  final_audio_proc_ms?: unknown;
  total_audio_proc_ms?: unknown;
  finished?: unknown;
  error_code?: unknown;
  error_type?: unknown;
  error_message?: unknown;
}

/** The reasons this engine reports (the `stt_failed` reason vocabulary, docs/protocol.md). */
export const ProviderBReason = {
  AUTH: 'provider_auth',
  BUDGET: 'provider_budget',
  RATE_LIMITED: 'provider_rate_limited',
  INVALID_REQUEST: 'provider_invalid_request',
  SERVER_ERROR: 'provider_5xx',
  IDLE_TIMEOUT: 'soniox_idle_timeout',
  ROTATION: 'soniox_rotation',
  CONNECTION_LOST: 'connection_lost',
  SEND_FAILED: 'send_failed',
  STALLED: 'provider_stalled',
  INITIALIZATION_FAILED: 'initialization_failed',
  LANGUAGE_UNSUPPORTED: 'language_unsupported',
} as const;
export type ProviderBReason = (typeof ProviderBReason)[keyof typeof ProviderBReason];

const BUDGET_TYPES = new Set(['organization_balance_exhausted', 'organization_monthly_budget_exhausted', 'project_monthly_budget_exhausted', 'organization_quota_exhausted']);
const RATE_TYPES = new Set(['limit_exceeded', 'rate_limit_exceeded']);

function failure(reason: ProviderBReason): SttFailure {
  switch (reason) {
    case 'provider_auth':
    case 'provider_budget':
    case 'provider_invalid_request':
    case 'language_unsupported':
      // Our key, account or request: the same attempt fails the same way until an operator acts.
      return { outcome: Outcome.CONFIG_ERROR, retryable: false, reason };
    default:
      return { outcome: Outcome.UPSTREAM_ERROR, retryable: true, reason };
  }
}

/** A status the provider answered the HTTP upgrade with (no WebSocket). */
export function failureFromStatus(status: number): SttFailure {
  if (status === 401 || status === 403) return failure(ProviderBReason.AUTH);
  if (status === 402) return failure(ProviderBReason.BUDGET);
  if (status === 429) return failure(ProviderBReason.RATE_LIMITED);
  if (status >= 500) return failure(ProviderBReason.SERVER_ERROR);
  if (status >= 400) return failure(ProviderBReason.INVALID_REQUEST);
  return failure(ProviderBReason.INITIALIZATION_FAILED);
}

/**
 * An error frame received on an open stream: the provider answers every problem with one JSON frame
 * `{error_code, error_type, error_message}` and a close. Its text is only read to tell the idle watchdog's 400
 * ("No audio received") from other 400s, and is never logged or passed on.
 */
export function failureFromErrorFrame(msg: ProviderBMessage): SttFailure {
  const code = typeof msg.error_code === 'number' ? msg.error_code : Number(msg.error_code);
  const type = typeof msg.error_type === 'string' ? msg.error_type.toLowerCase() : '';
  const text = typeof msg.error_message === 'string' ? msg.error_message : '';
  if (code === 401 || code === 403) return failure(ProviderBReason.AUTH);
  if (code === 402 || BUDGET_TYPES.has(type)) return failure(ProviderBReason.BUDGET);
  if (code === 429 || RATE_TYPES.has(type)) return failure(ProviderBReason.RATE_LIMITED);
  // The idle watchdog: 408 after 20 s without audio or keepalive, or 400 "No audio received" on a stream never fed.
  if (code === 408 || type === 'request_timeout' || (code === 400 && /no audio/i.test(text))) return failure(ProviderBReason.IDLE_TIMEOUT);
  // Documented rotation: the stream reached its maximum duration; a new connection continues.
  if (code === 413) return failure(ProviderBReason.ROTATION);
  if (code >= 400 && code < 500) return failure(ProviderBReason.INVALID_REQUEST);
  if (code >= 500 && code < 600) return failure(ProviderBReason.SERVER_ERROR);
  return failure(ProviderBReason.CONNECTION_LOST);
}

/** A failure for reasons this engine decides itself (drops, timeouts, send back-pressure, language). */
export function failureFor(reason: ProviderBReason): SttFailure {
  return failure(reason);
}

/** `Retry-After` (delta-seconds or an HTTP date) in milliseconds from `nowMs`; undefined when absent or unreadable. */
export function retryAfterMs(header: string | string[] | undefined, nowMs: number): number | undefined {
  const value = Array.isArray(header) ? header[0] : header;
  if (value === undefined || value.trim() === '') return undefined;
  if (/^\d+$/.test(value.trim())) return Number(value.trim()) * 1000;
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, at - nowMs);
}
