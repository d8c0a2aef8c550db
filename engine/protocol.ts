// Wire constants of the public contract: scopes, key kinds, WebSocket close codes, message types, statuses.
// One place, so handlers never scatter string literals (docs/protocol.md, docs/errors.md).

/** The eight API key scopes, exact strings. */
export const SCOPES = [
  'conversations:read',
  'memories:read',
  'action_items:read',
  'goals:read',
  'conversations:write',
  'memories:write',
  'action_items:write',
  'goals:write',
] as const;
export type Scope = (typeof SCOPES)[number];

/** Scopes a key receives when its creator names none. */
export const DEFAULT_SCOPES: readonly Scope[] = SCOPES.filter((s) => s.endsWith(':read'));

/** Key families: `svc_dev_` authenticates developer REST, `svc_mcp_` only the MCP endpoint, `svc_app_` is an app's own secret. */
export const KEY_KINDS = { dev: 'svc_dev_', mcp: 'svc_mcp_', app: 'svc_app_' } as const;
export type KeyKind = keyof typeof KEY_KINDS;

/** WebSocket close codes the listen endpoint uses. */
export const CloseCode = {
  NORMAL: 1000,
  GOING_AWAY: 1001,
  UNSUPPORTED_DATA: 1003,
  POLICY_VIOLATION: 1008,
  MESSAGE_TOO_BIG: 1009,
  INTERNAL_ERROR: 1011,
  SERVICE_RESTART: 1012,
  TRY_AGAIN_LATER: 1013,
  /**
   * ack=enabled: `resume` names no session of the user's this service holds a log of (never one, another user's, or
   * past its retention).
   */
  UNKNOWN_SESSION: 4404,
  /** The account was deleted: its sessions are closed and a device should stop streaming for it. */
  ACCOUNT_DELETED: 4410,
  /** ack=enabled: another connection resumed this session; this one takes no more audio. */
  SESSION_RESUMED: 4409,
  /** ack=enabled: the session's audio log reached its bound (AUDIO_LOG_MAX_SESSION_BYTES). */
  AUDIO_LOG_FULL: 4413,
} as const;
export type CloseCode = (typeof CloseCode)[keyof typeof CloseCode];

/** `service_status` values, in the order a session passes them. */
export const ServiceStatus = {
  INITIATING: 'initiating',
  IN_PROGRESS_CONVERSATIONS_PROCESSING: 'in_progress_conversations_processing',
  STT_INITIATING: 'stt_initiating',
  READY: 'ready',
  STT_FAILED: 'stt_failed',
} as const;
export type ServiceStatus = (typeof ServiceStatus)[keyof typeof ServiceStatus];

/** The closed transcription outcome vocabulary. */
export const Outcome = {
  SUCCESS: 'success',
  EXPECTED_SILENCE: 'expected_silence',
  EMPTY_UNEXPECTED: 'empty_unexpected',
  TIMEOUT: 'timeout',
  UPSTREAM_ERROR: 'upstream_error',
  CONFIG_ERROR: 'config_error',
  INVALID_INPUT: 'invalid_input',
} as const;
export type Outcome = (typeof Outcome)[keyof typeof Outcome];

/** Conversation status (docs/protocol.md, Conversation lifecycle). */
export const ConversationStatus = {
  IN_PROGRESS: 'in_progress',
  PROCESSING: 'processing',
  COMPLETED: 'completed',
  FAILED: 'failed',
} as const;
export type ConversationStatus = (typeof ConversationStatus)[keyof typeof ConversationStatus];

/** `type` of JSON messages on the listen WebSocket, both directions (docs/protocol.md). */
export const ListenMessage = {
  SERVICE_STATUS: 'service_status',
  SEGMENTS_DELETED: 'segments_deleted',
  MEMORY_PROCESSING_STARTED: 'memory_processing_started',
  MEMORY_CREATED: 'memory_created',
  SUGGESTED_TRANSCRIPT: 'suggested_transcript',
  SPEAKER_ASSIGNED: 'speaker_assigned',
  SPEAKER_LABEL_SUGGESTION: 'speaker_label_suggestion',
  IMAGE_CHUNK: 'image_chunk',
  TRANSLATION: 'translation',
  /** ack=enabled: the session's id (to resume with) and where its audio continues. */
  AUDIO_SESSION: 'audio_session',
  /** ack=enabled: audio up to `offset_ms` is durable. */
  AUDIO_ACK: 'audio_ack',
} as const;
export type ListenMessage = (typeof ListenMessage)[keyof typeof ListenMessage];

/** Human text sent with each `service_status`, the compatible system's words; `ready` carries none. */
export const SERVICE_STATUS_TEXT: Readonly<Partial<Record<ServiceStatus, string>>> = {
  initiating: 'Service Starting',
  in_progress_conversations_processing: 'Processing Conversations',
  stt_initiating: 'STT Service Starting',
};

/** Timings and sizes of the listen protocol, the public limits. */
export const LISTEN = {
  /** The server's text-frame heartbeat `"ping"`, every 10 s. */
  heartbeatText: 'ping',
  heartbeatIntervalMs: 10_000,
  /** No client message of any kind for this long closes the session with 1001. */
  inactivityTimeoutMs: 90_000,
  /** Transcript buffer processing interval. */
  bufferWindowMs: 600,
  /** Binary messages of at most this many bytes are client keep-alives. */
  keepAliveMaxBytes: 2,
  conversationTimeoutDefaultS: 120,
  conversationTimeoutMinS: 2,
  conversationTimeoutMaxS: 14_400,
  /** Close reason after `stt_failed`. */
  sttFailedReason: 'transcription_service_unavailable',
} as const;

/** The external custom transcription server's protocol (docs/patterns/custom-stt.md). */
export const CUSTOM_STT = {
  /** Provider name in segments (`stt_provider`) and in failures. */
  provider: 'custom',
  /** Sent as a text frame to end the stream. */
  closeStreamText: '{"type":"CloseStream"}',
  /** The only `type` an answer may carry (or none). */
  resultsType: 'Results',
  /** No frame in either direction for this long closes the connection. */
  inactivityTimeoutMs: 90_000,
} as const;
