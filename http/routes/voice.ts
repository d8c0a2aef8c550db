// Voice messages over HTTP: POST /v2/voice-message/transcribe answers JSON, POST /v2/voice-messages the same work as
// server-sent events (docs/voice.md). Both count against one per-user budget.
import { randomUUID } from 'node:crypto';
import { Type } from '@sinclair/typebox';
import { RateLimiter } from '../../engine/identity/rate-limit.js';
import { DataVersions } from '../../engine/cache/data-versions.js';
import { Outcome } from '../../engine/protocol.js';
import { VoiceFailure } from '../../engine/voice/outcome.js';
import type { VoiceResult } from '../../engine/voice/transcriber.js';
import type { RequestContext, StreamSink } from '../adapter.js';
import type { Principal } from '../../engine/identity/authenticator.js';
import { StringEnum } from './common.js';
import type { AppRoute, Services } from './types.js';

/**
 * Largest voice-message body, in bytes (a larger declared one answers 413 unread): 32 MiB holds the longest message
 * (900 s) as 16 kHz linear16 or WAV, and far more as Opus; JSON routes keep MAX_BODY_BYTES.
 */
export const VOICE_MAX_BODY_BYTES = 32 * 1024 * 1024;

/** Voice messages one user may send per minute and per UTC day, both routes together. */
export const VOICE_PER_MINUTE = 20;
export const VOICE_PER_DAY = 500;

const VoiceQuery = Type.Object({
  language: Type.Optional(Type.String({ description: 'language code (`en`, `pt-BR`), or `multi`/`auto` to detect it; default: the user\'s language setting, else detection (else `en`). A multipart form\'s `language` field takes precedence.' })),
  encoding: Type.Optional(Type.String({ description: 'raw body only: `linear16` (the default and the only one)' })),
  sample_rate: Type.Optional(Type.String({ description: 'raw body only: 8000 to 48000 Hz; default 16000' })),
  channels: Type.Optional(Type.String({ description: 'raw body only: 1 or 2 (interleaved); default 1' })),
});

const FailureSchema = Type.Object(
  {
    error: Type.String({ description: '`stt_invalid_input`, `stt_empty_unexpected`, `stt_upstream_error`, `stt_provider_configuration_error` or `stt_timeout`' }),
    outcome: StringEnum([Outcome.INVALID_INPUT, Outcome.EMPTY_UNEXPECTED, Outcome.UPSTREAM_ERROR, Outcome.CONFIG_ERROR, Outcome.TIMEOUT]),
    provider: Type.String({ description: '`provider_a`, `provider_b`, `local`, or `unknown` when none was chosen' }),
    retryable: Type.Boolean(),
    message: Type.String({ description: 'public-safe: never a provider\'s words, an audio id or exception text' }),
  },
  { title: 'VoiceFailure', description: 'why a voice message failed' },
);
const FailureAnswer = Type.Object({ detail: FailureSchema }, { title: 'VoiceFailureAnswer', description: 'a failed voice message: the outcome and a public-safe message, nothing else' });

const ResultSchema = Type.Object(
  {
    transcript: Type.String({ description: 'empty for `expected_silence`' }),
    language: Type.String({ description: 'the language detected, else the one transcribed in' }),
    stt_provider: Type.String(),
    stt_model: Type.String(),
    outcome: StringEnum([Outcome.SUCCESS, Outcome.EXPECTED_SILENCE]),
  },
  { title: 'VoiceTranscription', description: 'a voice message transcribed (`success`), or found silent (`expected_silence`, empty transcript)' },
);

const UPLOAD = {
  description: 'a multipart form (`files`: one or more `.wav` or `.bin` files; `language`) or raw linear16 PCM described by the query',
  content: {
    'multipart/form-data': Type.Object({
      files: Type.Array(Type.String({ format: 'binary' }), { description: '`.wav`, or `<name>_<unix-ts>[_fs<N>].bin` of 4-byte little-endian length-prefixed Opus packets (16 kHz, frame size N samples, default 160)' }),
      language: Type.Optional(Type.String()),
    }),
    'application/octet-stream': Type.String({ format: 'binary', description: 'little-endian 16-bit PCM, interleaved when stereo' }),
  },
};

const FAILURE_RESPONSES = {
  400: { description: 'invalid_input: the audio cannot be decoded or the request breaks the rules', schema: FailureAnswer },
  413: { description: 'the body is larger than 32 MiB' },
  429: { description: 'over the per-user voice budget; see `Retry-After`' },
  502: { description: 'empty_unexpected or upstream_error', schema: FailureAnswer },
  503: { description: 'config_error: no engine serves the language, or the provider refused the key', schema: FailureAnswer },
  504: { description: 'timeout: the provider did not answer in time', schema: FailureAnswer },
};

/** The message an SSE client gets for a transcript: the human chat message the compatible system creates from it. */
function messageOf(result: VoiceResult, nowMs: number): Record<string, unknown> {
  return {
    id: randomUUID(),
    text: result.transcript,
    created_at: new Date(nowMs).toISOString(),
    sender: 'human',
    type: 'text',
    language: result.language,
    stt_provider: result.stt_provider,
    stt_model: result.stt_model,
  };
}

export function voiceRoutes(s: Services): AppRoute[] {
  const limiter = new RateLimiter({
    redis: s.redis,
    clock: s.clock,
    prefix: `${s.config.redisPrefix}:voice`,
    perMinute: VOICE_PER_MINUTE,
    perDay: VOICE_PER_DAY,
    versions: new DataVersions({ redis: s.redis, prefix: s.config.redisPrefix, logger: s.logger }),
  });

  /** Counts the request against the user's budget (429 over it); answers the X-RateLimit-* headers. */
  async function count(uid: string): Promise<Record<string, string>> {
    return (await limiter.hit(`user:${uid}`, uid)).headers;
  }

  function run(ctx: RequestContext<Principal>, signal?: AbortSignal): Promise<VoiceResult> {
    const uid = ctx.auth.uid;
    return s.voice.handle(
      { contentType: ctx.headers['content-type'], query: ctx.query, body: ctx.raw, nowMs: s.clock.now() },
      async () => (await s.userSettings.get(uid)).language,
      signal,
    );
  }

  function stream(ctx: RequestContext<Principal>, sink: StreamSink): void {
    const ac = new AbortController();
    sink.onClose(() => ac.abort());
    run(ctx, ac.signal).then(
      (result) => {
        if (result.outcome === Outcome.SUCCESS) sink.write(`message: ${Buffer.from(JSON.stringify(messageOf(result, s.clock.now()))).toString('base64')}\n\n`);
        sink.end();
      },
      (err: unknown) => {
        const body = err instanceof VoiceFailure ? err.body : new VoiceFailure(Outcome.UPSTREAM_ERROR, undefined).body;
        sink.write(`error: ${JSON.stringify(body)}\n\n`);
        sink.end();
      },
    );
  }

  const common = {
    method: 'post',
    tags: ['Voice'],
    auth: { kind: 'id_token' },
    query: VoiceQuery,
    rawBody: UPLOAD,
    maxBodyBytes: VOICE_MAX_BODY_BYTES,
  } as const;

  return [
    {
      ...common,
      path: '/v2/voice-message/transcribe',
      operationId: 'transcribeVoiceMessage',
      summary: 'Transcribe a voice message',
      description:
        'A Silero speech gate decides first: no speech is 200 with an empty transcript and outcome `expected_silence`. ' +
        'The engine is the first configured one that serves the language; none: 503 `config_error`. Every failure is ' +
        'non-2xx with `{"detail": {error, outcome, provider, retryable, message}}` and nothing else. ' +
        `At most ${VOICE_PER_MINUTE} voice messages per user per minute and ${VOICE_PER_DAY} per UTC day (both voice routes together).`,
      responses: { 200: { description: 'transcribed, or silence', schema: ResultSchema }, ...FAILURE_RESPONSES },
      async handler(ctx) {
        const headers = await count(ctx.auth.uid);
        try {
          return { body: await run(ctx), headers };
        } catch (err) {
          if (err instanceof VoiceFailure) throw err.toEngineError(headers);
          throw err;
        }
      },
    },
    {
      ...common,
      path: '/v2/voice-messages',
      operationId: 'streamVoiceMessage',
      summary: 'Transcribe a voice message, answered as server-sent events',
      description:
        'The same input and work as /v2/voice-message/transcribe, answered as `text/event-stream`: a `message: <base64 JSON>` ' +
        'frame with the transcript as a chat message `{id, text, created_at, sender, type, language, stt_provider, stt_model}` ' +
        'when there is text, nothing for `expected_silence`, and on failure one terminal `error: <JSON>` frame with the same ' +
        '`{error, outcome, provider, retryable, message}` object. Authentication, size and budget refusals are plain HTTP answers.',
      responses: { 200: { description: 'text/event-stream' }, 413: FAILURE_RESPONSES[413], 429: FAILURE_RESPONSES[429] },
      async handler(ctx) {
        const headers = await count(ctx.auth.uid);
        return { contentType: 'text/event-stream', headers: { ...headers, 'x-accel-buffering': 'no' }, stream: (sink) => stream(ctx, sink) };
      },
    },
  ];
}
