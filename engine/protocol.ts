// Wire constants of the public contract (SPEC.md): scopes, key kinds, WebSocket close codes, message types, statuses.

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

/** Key families: `svc_dev_` authenticates developer REST, `svc_mcp_` only the MCP endpoint. */
export const KEY_KINDS = { dev: 'svc_dev_', mcp: 'svc_mcp_' } as const;
export type KeyKind = keyof typeof KEY_KINDS;

/** WebSocket close codes the listen endpoint uses. */
export const CloseCode = {
  NORMAL: 1000,
  GOING_AWAY: 1001,
  UNSUPPORTED_DATA: 1003,
  POLICY_VIOLATION: 1008,
  INTERNAL_ERROR: 1011,
  SERVICE_RESTART: 1012,
  TRY_AGAIN_LATER: 1013,
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

/** Transcription outcome vocabulary (SPEC, Errors). */
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

/** Conversation status (SPEC, States and transitions). */
export const ConversationStatus = {
  IN_PROGRESS: 'in_progress',
  PROCESSING: 'processing',
  COMPLETED: 'completed',
  FAILED: 'failed',
} as const;
export type ConversationStatus = (typeof ConversationStatus)[keyof typeof ConversationStatus];
