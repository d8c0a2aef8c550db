// Parses and validates the /v4/listen query string (parameters and defaults in docs/protocol.md); pure, no sockets.
import { LISTEN } from '../protocol.js';
import { DEFAULT_LIVE_SOURCE, UNKNOWN_SOURCE, isConversationSource, type ConversationSource } from '../conversations/sources.js';

/** The session's parameters after defaults. `codec`, `sampleRate` and `channels` are checked later by the codec layer (close 1003). */
export interface ListenParams {
  uid: string;
  /** `auto` is rewritten to `multi`. */
  language: string;
  sampleRate: number;
  /** Any string here; unknown codecs are refused with close 1003 after the upgrade. */
  codec: string;
  channels: number;
  includeSpeechProfile: boolean;
  /** Seconds of no new segments before the conversation is processed. */
  conversationTimeoutS: number;
  sttService: 'provider_a' | 'provider_b' | null;
  customStt: boolean;
  /** One of CONVERSATION_SOURCES; DEFAULT_LIVE_SOURCE when the query has none, UNKNOWN_SOURCE for a value not in the list. */
  source: ConversationSource;
  /** `ack=enabled`: frames go to the session's audio log and are acknowledged once durable (docs/protocol.md). */
  ack: boolean;
  /** `resume=<session id>&offset_ms=N`: continue that session's log; N is the session offset of the first frame sent. */
  resume: { sessionId: string; offsetMs: number } | null;
}

export type ParseResult = { ok: true; params: ListenParams } | { ok: false; reason: string };

const LANGUAGE = /^(multi|[a-z]{2,3}(-[A-Za-z0-9]{2,8})*)$/;

function intParam(q: URLSearchParams, name: string, fallback: number): number | string {
  const raw = q.get(name);
  if (raw === null || raw === '') return fallback;
  if (!/^-?\d{1,9}$/.test(raw)) return `${name} must be an integer`;
  return Number(raw);
}

function boolParam(q: URLSearchParams, name: string, fallback: boolean): boolean | string {
  const raw = q.get(name);
  if (raw === null || raw === '') return fallback;
  const v = raw.toLowerCase();
  if (v === 'true' || v === '1') return true;
  if (v === 'false' || v === '0') return false;
  return `${name} must be true or false`;
}

/** Validates a raw query string (without `?`). Reasons never echo the offending value beyond the parameter name. */
export function parseListenQuery(query: string): ParseResult {
  const q = new URLSearchParams(query);
  const fail = (reason: string): ParseResult => ({ ok: false, reason });
  const uid = q.get('uid') ?? '';
  if (uid === '' || uid.length > 128) return fail('uid is required');
  let language = (q.get('language') || 'en').trim();
  if (language === 'auto') language = 'multi';
  if (!LANGUAGE.test(language)) return fail('language is not a language code');
  const sampleRate = intParam(q, 'sample_rate', 8000);
  if (typeof sampleRate === 'string') return fail(sampleRate);
  const channels = intParam(q, 'channels', 1);
  if (typeof channels === 'string') return fail(channels);
  const codec = q.get('codec') || 'pcm8';
  const includeSpeechProfile = boolParam(q, 'include_speech_profile', true);
  if (typeof includeSpeechProfile === 'string') return fail(includeSpeechProfile);
  const timeout = intParam(q, 'conversation_timeout', LISTEN.conversationTimeoutDefaultS);
  if (typeof timeout === 'string') return fail(timeout);
  if (timeout < LISTEN.conversationTimeoutMinS || timeout > LISTEN.conversationTimeoutMaxS) {
    return fail(`conversation_timeout must be between ${LISTEN.conversationTimeoutMinS} and ${LISTEN.conversationTimeoutMaxS}`);
  }
  const stt = q.get('stt_service') || null;
  if (stt !== null && stt !== 'provider_a' && stt !== 'provider_b') return fail('stt_service must be provider_a or provider_b');
  const custom = q.get('custom_stt') || 'disabled';
  if (custom !== 'enabled' && custom !== 'disabled') return fail('custom_stt must be enabled or disabled');
  // Filed under the catch-all rather than refused, as the compatible system does: a device naming a source this
  // version does not know yet must still record.
  const named = q.get('source') || DEFAULT_LIVE_SOURCE;
  const source: ConversationSource = isConversationSource(named) ? named : UNKNOWN_SOURCE;
  const ackRaw = q.get('ack') || 'disabled';
  if (ackRaw !== 'enabled' && ackRaw !== 'disabled') return fail('ack must be enabled or disabled');
  const resumeId = q.get('resume') || null;
  let resume: ListenParams['resume'] = null;
  if (resumeId !== null) {
    if (ackRaw !== 'enabled') return fail('resume needs ack=enabled');
    if (!/^[A-Za-z0-9_-]{1,100}$/.test(resumeId)) return fail('resume is not a session id');
    const offset = intParam(q, 'offset_ms', -1);
    if (typeof offset === 'string') return fail(offset);
    if (offset < 0) return fail('offset_ms is required with resume');
    resume = { sessionId: resumeId, offsetMs: offset };
  }
  return {
    ok: true,
    params: {
      uid,
      language,
      sampleRate,
      codec,
      channels,
      includeSpeechProfile,
      conversationTimeoutS: timeout,
      sttService: stt,
      customStt: custom === 'enabled',
      source,
      ack: ackRaw === 'enabled',
      resume,
    },
  };
}
