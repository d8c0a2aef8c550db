// The error catalogue: one stable code per failure, with its HTTP status, public message and whether a retry can help.
// docs/errors.md lists the same codes; test/engine/errors.test.ts keeps the two in step.

interface ErrorDef {
  /** HTTP status the error answers with. */
  readonly status: number;
  /** Public message; `{name}` placeholders are filled from the error's params. Never carries user content. */
  readonly message: string;
  /** Whether the same request can succeed later without change. */
  readonly retryable: boolean;
}

function def(status: number, message: string, retryable = false): ErrorDef {
  return { status, message, retryable };
}

export const ERRORS = {
  // Configuration and boot: these stop start-up, they never reach a client.
  ENG_ERR_CONFIG_INVALID: def(500, 'Invalid configuration: {reason}'),
  ENG_ERR_BOOT_UWS_NATIVE: def(500, 'uWebSockets.js native binary did not load'),
  ENG_ERR_BOOT_REDIS_UNAVAILABLE: def(500, 'Redis is unreachable and no embedded redis-server could be started'),

  // HTTP framing and validation.
  ENG_ERR_HTTP_NOT_FOUND: def(404, 'Not Found'),
  ENG_ERR_HTTP_METHOD_NOT_ALLOWED: def(405, 'Method Not Allowed'),
  ENG_ERR_HTTP_BODY_TOO_LARGE: def(413, 'Request body too large: the limit is {limit} bytes'),
  ENG_ERR_HTTP_VALIDATION: def(422, 'Validation error'),
  ENG_ERR_HTTP_BAD_REQUEST: def(400, '{reason}'),

  // Authentication and authorization.
  ENG_ERR_AUTH_HEADER_MISSING: def(401, "Missing or invalid Authorization header. Must be 'Bearer API_KEY'"),
  ENG_ERR_AUTH_KEY_INVALID: def(401, 'Invalid API Key'),
  ENG_ERR_AUTH_KEY_WRONG_KIND: def(401, 'Invalid API Key: {kind} keys are not accepted here'),
  ENG_ERR_AUTH_SCOPE_MISSING: def(403, 'Insufficient permissions. Required scope: {scope}'),
  ENG_ERR_AUTH_NOT_AUTHENTICATED: def(401, 'Not authenticated'),
  ENG_ERR_AUTH_TOKEN_INVALID: def(401, 'Invalid or expired token'),
  ENG_ERR_AUTH_ACCOUNT_DELETED: def(401, 'This account was deleted; sign in again'),

  // Developer data API.
  ENG_ERR_RESOURCE_NOT_FOUND: def(404, '{resource} not found'),
  ENG_ERR_MEMORY_ACCESS_NOT_READY: def(403, 'Developer memory access is not enabled for this account yet. The key can be valid and correctly scoped.'),
  ENG_ERR_CATEGORY_INVALID: def(400, 'Invalid category: {category}. Valid categories: {valid}'),
  ENG_ERR_RATE_LIMITED: def(429, 'Rate limit exceeded. Try again in {seconds}s.', true),
  ENG_ERR_CONVERSATION_BUSY: def(409, 'Conversation is {status}: it can be reprocessed once it is completed or failed', true),

  // API keys.
  ENG_ERR_KEY_SCOPE_UNKNOWN: def(400, 'Invalid scopes. Available: {available}'),
  ENG_ERR_KEY_NOT_FOUND: def(404, 'API key not found'),

  // Webhooks and apps (http/routes/webhooks.ts, http/routes/apps.ts, engine/webhooks/).
  ENG_ERR_WEBHOOK_DESTINATION_REFUSED: def(400, '{reason}'),
  ENG_ERR_WEBHOOK_NOT_SET: def(409, 'No {type} webhook URL is set: save one first'),
  ENG_ERR_WEBHOOK_DELIVERY_IN_FLIGHT: def(409, 'The delivery is still under way: it can be sent again once it has ended', true),
  ENG_ERR_WEBHOOK_DELIVERY_LIVE: def(409, 'A live {type} delivery cannot be sent again: its batch is not kept'),
  ENG_ERR_APP_SETUP_INCOMPLETE: def(409, "The app's setup is not completed yet: finish it with the app's instructions, then install again"),
  ENG_ERR_APP_SETUP_CHECK_FAILED: def(502, "The app's setup check failed: {reason}", true),

  // Notifications (http/routes/notifications.ts).
  ENG_ERR_APP_NOT_INSTALLED: def(404, 'User does not have this app installed'),
  ENG_ERR_NOTIFICATION_RATE_LIMITED: def(429, 'Rate limit exceeded. Maximum {limit} notifications per hour.', true),

  // Dependencies and the unexpected.
  ENG_ERR_DEPENDENCY_UNAVAILABLE: def(503, 'Service temporarily unavailable: {dependency} is unreachable', true),
  ENG_ERR_INTERNAL: def(500, 'Internal Server Error', true),

  // Live audio codecs (engine/codec/pool.ts, workers/decode.ts).
  ENG_ERR_CODEC_UNSUPPORTED: def(400, 'Unsupported audio format: {reason}'),
  ENG_ERR_CODEC_FAILED: def(500, 'Audio decoder failed: {reason}', true),
  ENG_ERR_CODEC_STREAM_CLOSED: def(500, 'Audio stream {sessionId} is closed'),

  // Speech-to-text (engine/stt/).
  ENG_ERR_STT_LANGUAGE_UNSUPPORTED: def(400, 'The {engine} speech engine does not support language {language}'),
  ENG_ERR_STT_LOCAL_FAILED: def(500, 'Local speech engine failed: {reason}', true),
  ENG_ERR_STT_VAD_FAILED: def(500, 'Speech gate failed: {reason}', true),

  // Voice messages (http/routes/voice.ts, engine/voice/): the failures of the transcription outcome vocabulary.
  ENG_ERR_VOICE_INVALID_INPUT: def(400, 'The audio cannot be decoded or the request is not valid'),
  ENG_ERR_VOICE_EMPTY_UNEXPECTED: def(502, 'Speech was detected but the transcription came back empty', true),
  ENG_ERR_VOICE_UPSTREAM_ERROR: def(502, 'The transcription provider failed', true),
  ENG_ERR_VOICE_CONFIG_ERROR: def(503, 'No transcription provider on this server can serve the request'),
  ENG_ERR_VOICE_TIMEOUT: def(504, 'The transcription provider did not answer in time', true),

  // Offline sync (http/routes/sync.ts, engine/sync/).
  ENG_ERR_SYNC_INVALID_FILE: def(400, '{reason}'),
  ENG_ERR_SYNC_BATCH_TOO_LARGE: def(413, 'A batch may hold at most {limit}'),
  ENG_ERR_SYNC_OFFSET_CONFLICT: def(409, 'Upload-Offset does not match the stored offset {offset}: ask for the offset and continue from it'),
  ENG_ERR_SYNC_FAIR_USE: def(429, '{reason}: try again in {seconds}s', true),
  // Speech profile, people and voice samples (http/routes/speakers.ts, engine/db/voiceprints.ts).
  ENG_ERR_AUDIO_INVALID: def(400, '{reason}'),
  ENG_ERR_PROFILE_DURATION: def(400, 'Audio duration is invalid (must be 5-120 seconds of speech; found {seconds} s)'),
  ENG_ERR_PEOPLE_LIMIT: def(409, 'You have {limit} people, the most an account may have: delete one first'),
} as const satisfies Record<string, ErrorDef>;

export type ErrorCode = keyof typeof ERRORS;

/** Body detail for FastAPI-style validation errors (HTTPValidationError). */
export interface ValidationIssue {
  loc: (string | number)[];
  msg: string;
  type: string;
  ctx?: Record<string, unknown>;
}

/**
 * An error with a stable code. Callers match on `code`, never on `instanceof` or message text.
 * `detail` overrides the body's `detail` when the contract wants a structured object or an array.
 */
export class EngineError extends Error {
  readonly status: number;
  readonly retryable: boolean;
  readonly detail: unknown;
  readonly headers: Readonly<Record<string, string>>;

  constructor(
    readonly code: ErrorCode,
    params: Readonly<Record<string, string | number>> = {},
    options: { detail?: unknown; headers?: Record<string, string>; cause?: unknown } = {},
  ) {
    const entry: ErrorDef = ERRORS[code];
    const message = entry.message.replace(/\{(\w+)\}/g, (_, k: string) => String(params[k] ?? `{${k}}`));
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'EngineError';
    this.status = entry.status;
    this.retryable = entry.retryable;
    this.detail = options.detail ?? message;
    this.headers = options.headers ?? {};
  }
}

/** A 422 answer in FastAPI's HTTPValidationError shape. */
export function validationError(issues: ValidationIssue[]): EngineError {
  return new EngineError('ENG_ERR_HTTP_VALIDATION', {}, { detail: issues });
}

/** A 422 for one field that failed a rule the schema cannot express (pydantic's `value_error`). */
export function valueError(loc: (string | number)[], reason: string): EngineError {
  return validationError([{ loc, msg: `Value error, ${reason}`, type: 'value_error' }]);
}

/** What a library's error may carry, as the dependency checks read it. */
export interface ErrorFields {
  code?: unknown;
  name?: unknown;
  message?: unknown;
  cause?: unknown;
}

/** Whether `test` holds for `err` or one of its first causes (a wrapper's cause, and that one's). */
export function anyCause(err: unknown, test: (e: ErrorFields) => boolean): boolean {
  for (let e = err as ErrorFields | undefined, depth = 0; e && depth < 4; e = e.cause as ErrorFields | undefined, depth++) if (test(e)) return true;
  return false;
}

export function isEngineError(err: unknown): err is EngineError {
  const code = (err as { code?: unknown } | null)?.code;
  return err instanceof Error && typeof code === 'string' && code in ERRORS && typeof (err as { status?: unknown }).status === 'number';
}
