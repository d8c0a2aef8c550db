// Service configuration: the only reader of process.env; validates everything once at boot and returns a frozen object.
import path from 'node:path';
import fs from 'node:fs';
import { availableParallelism } from 'node:os';
import { readServiceAccount } from './notifications/service-account.js';
import { CLUSTER_URL_FORM, isClusterUrl, parseClusterUrl } from './redis-url.js';

/** Log levels pino accepts. */
export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/**
 * CPU one streaming Opus session with a provider costs a listen node, in µs per session-second (the fleet bench's
 * figure, docs/performance.md "Capacity").
 */
export const SESSION_CPU_US_PER_S = 1400;
/** Share of each core the default session limit plans to fill: the rest absorbs collection, bursts and loop latency. */
export const SESSION_CORE_SHARE = 0.6;

/** MAX_SESSIONS when unset: what `cores` hold at SESSION_CPU_US_PER_S each within SESSION_CORE_SHARE, in fifties. */
export function defaultMaxSessions(cores: number = availableParallelism()): number {
  return Math.max(50, Math.floor((cores * SESSION_CORE_SHARE * 1e6) / SESSION_CPU_US_PER_S / 50) * 50);
}

export const ROLES = ['all', 'api', 'listen', 'jobs'] as const;
export type Role = (typeof ROLES)[number];

export interface Config {
  /** Interface to listen on. @defaultValue '0.0.0.0' */
  readonly host: string;
  /** TCP port for REST, WebSocket, /health and /metrics; 0 picks a free one. @defaultValue 8080 */
  readonly port: number;
  /** Which parts this process runs. @defaultValue 'all' */
  readonly role: Role;
  /** Directory for the sqlite file, the local ID-token key and an embedded Redis. @defaultValue './data' */
  readonly dataDir: string;
  /** PostgreSQL URL; when unset the embedded sqlite file is used. @defaultValue undefined */
  readonly databaseUrl: string | undefined;
  /** PostgreSQL schema the service owns (created when missing). @defaultValue 'public' */
  readonly databaseSchema: string;
  /**
   * How long a sqlite write waits for another connection's write lock before it fails (and the transcript step that
   * made it tries again at the next step). @defaultValue 5000
   */
  readonly sqliteBusyTimeoutMs: number;
  /**
   * PostgreSQL only: how long a query waits for its answer before it fails (503 to a request, the next step for a
   * live session's write), so a database that stops answering holds nothing for ever; 0 waits. Migrations have no
   * limit. @defaultValue 30000
   */
  readonly databaseQueryTimeoutMs: number;
  /**
   * Redis URL for queues, rate limits, caches and locks: one server, or a Redis Cluster as
   * `redis+cluster://host1:port1,host2:port2/`. @defaultValue 'redis://127.0.0.1:6379'
   */
  readonly redisUrl: string;
  /** Prefix of every Redis key and channel this service writes, so several deployments can share one Redis. @defaultValue 'svc' */
  readonly redisPrefix: string;
  /** Start a supervised redis-server under DATA_DIR when nothing answers at REDIS_URL: 'auto' or 'never'. @defaultValue 'auto' */
  readonly redisEmbedded: 'auto' | 'never';
  /** pino log level. @defaultValue 'info' */
  readonly logLevel: LogLevel;
  /** Largest accepted request body, in bytes; larger bodies answer 413 unread. @defaultValue 1048576 (1 MiB) */
  readonly maxBodyBytes: number;
  /** JWKS URL of the identity provider; when unset a local issuer signs and verifies ID tokens. @defaultValue undefined */
  readonly idTokenJwksUrl: string | undefined;
  /** Expected `iss` of ID tokens. @defaultValue 'urn:wearable-backend:local-issuer' for the local issuer */
  readonly idTokenIssuer: string;
  /** Expected `aud` of ID tokens. @defaultValue 'wearable-backend' for the local issuer */
  readonly idTokenAudience: string;
  /** Lifetime of tokens printed by `npm run token`, in seconds. @defaultValue 3600 (1 hour) */
  readonly idTokenTtlS: number;
  /** Tolerated clock skew when checking `exp`/`nbf`, in seconds. @defaultValue 30 */
  readonly idTokenClockToleranceS: number;
  /**
   * How long a verified ID token is remembered, in seconds, so a device reconnecting with it is admitted without
   * another signature check (never past the token's `exp`; 0 turns it off). @defaultValue 300 (5 minutes)
   */
  readonly idTokenCacheS: number;
  /** Minimum interval between `last_used_at` writes for one API key, in seconds. @defaultValue 60 */
  readonly keyLastUsedIntervalS: number;
  /** How long a verified API key stays in the in-process cache, in seconds (revocation evicts at once). @defaultValue 60 */
  readonly keyCacheTtlS: number;
  /** Longest wait for each step of a graceful shutdown (requests, session drain, each close), in milliseconds. @defaultValue 30000 (30 s) */
  readonly shutdownTimeoutMs: number;
  /** Whether new accounts may use the developer memory routes until an operator says otherwise. @defaultValue 'enabled' */
  readonly memoryAccessDefault: 'enabled' | 'disabled';
  /** Developer REST requests allowed per API key per minute. @defaultValue 100 */
  readonly rateLimitPerMinute: number;
  /** Developer REST requests allowed per user per UTC day. @defaultValue 10000 */
  readonly rateLimitPerDay: number;
  /** Bytes of serialised developer read answers each node keeps for reuse while their user's data is unchanged; 0 keeps none. @defaultValue 67108864 (64 MiB) */
  readonly responseCacheBytes: number;
  /** OpenAI-compatible chat-completions base URL; unset means the built-in deterministic extractor. @defaultValue undefined */
  readonly llmBaseUrl: string | undefined;
  /** API key for LLM_BASE_URL. @defaultValue undefined */
  readonly llmApiKey: string | undefined;
  /** Model name sent to LLM_BASE_URL. @defaultValue 'gpt-4.1-mini' */
  readonly llmModel: string;
  /** Timeout of one LLM request, in milliseconds. @defaultValue 30000 (30 s) */
  readonly llmTimeoutMs: number;
  /** Retries of a failed LLM request (timeouts, 429, 5xx). @defaultValue 2 */
  readonly llmMaxRetries: number;
  /** Run the Silero speech gate in front of the local engine ('on' or 'off'). @defaultValue true */
  readonly vadGate: boolean;
  /** Live listen sessions this node holds at most; one more is closed with 1013. @defaultValue defaultMaxSessions() */
  readonly maxSessions: number;
  /** Live listen sessions one user holds at most on this node; one more is closed with 1013. @defaultValue 4 */
  readonly maxSessionsPerUser: number;
  /** Audio bytes a session may have received but not yet decoded; past it the session is closed with 1013. @defaultValue 1048576 (1 MiB) */
  readonly listenMaxInboundBytes: number;
  /**
   * How long a session's audio log (ack=enabled) is kept once its conversations are processed, in seconds; it goes
   * at once with a deleted conversation. @defaultValue 3600 (1 hour)
   */
  readonly audioLogRetentionS: number;
  /** Bytes one session's audio log may hold; past it the session closes with 4413. @defaultValue 134217728 (128 MiB) */
  readonly audioLogMaxSessionBytes: number;
  /**
   * Days the logs are kept (ended webhook deliveries, app replies and what became of them, owners' notices, finished
   * sync jobs) before the hourly sweep deletes them; 0 keeps them. @defaultValue 30
   */
  readonly logRetentionDays: number;
  /** Days users' notifications are kept; 0 keeps them. @defaultValue 90 */
  readonly notificationRetentionDays: number;
  /** Bytes of audio logs one node's DATA_DIR may hold; past it a session closes with 1013. @defaultValue 4294967296 (4 GiB) */
  readonly audioLogMaxNodeBytes: number;
  /** Codec shard threads; 0 means one fewer than the CPUs, at least 2. @defaultValue 0 */
  readonly codecThreads: number;
  /**
   * New live sessions are refused with 1013 while a run of decode tasks each kept audio waiting at least this long
   * (engine/codec/overload.ts); 0: never. @defaultValue 300
   */
  readonly listenShedDecodeDelayMs: number;
  /**
   * New live sessions are refused with 1013 while the oldest live-transcript write not yet committed has waited at
   * least this long (the store falls behind the node's sessions); 0: never. @defaultValue 2000
   */
  readonly listenShedStoreDelayMs: number;
  /**
   * process-conversation jobs one node runs at once. A job mostly waits on the language model, so a node's throughput
   * is about this many jobs per model answer time; with the built-in processor the main thread's CPU sets it instead.
   * @defaultValue 16
   */
  readonly jobConcurrency: number;
  /** Speech engines in preference order, from provider_a, provider_b, local. @defaultValue the providers that have keys, then local */
  readonly sttProviders: readonly SttProviderName[];
  /** Deepgram-protocol live endpoint of provider_a. @defaultValue 'wss://api.deepgram.com/v1/listen' */
  readonly providerAUrl: string;
  /** API key of provider_a (sent as `Authorization: Token <key>`). @defaultValue undefined */
  readonly providerAApiKey: string | undefined;
  /** Soniox-protocol realtime endpoint of provider_b. @defaultValue 'wss://stt-rt.soniox.com/transcribe-websocket' */
  readonly providerBUrl: string;
  /** API key of provider_b (sent as `Authorization: Bearer` on the upgrade and in the first config frame). @defaultValue undefined */
  readonly providerBApiKey: string | undefined;
  /** ws:// or wss:// URL of an external custom transcription server for `custom_stt=enabled` sessions; unset: the app's suggested transcripts only. @defaultValue undefined */
  readonly customSttUrl: string | undefined;
  /**
   * Let webhook and app URLs reach loopback and private addresses ('on' for tests and on-premises receivers); cloud
   * metadata addresses stay refused either way. @defaultValue false
   */
  readonly webhookAllowPrivate: boolean;
  /**
   * A Firebase service-account JSON file (client_email, private_key, project_id): pushes go to every registered device
   * through FCM HTTP v1; unset, notifications reach users through the outbox and its event stream only. @defaultValue undefined
   */
  readonly fcmServiceAccountFile: string | undefined;
  /** OAuth token endpoint the service-account assertion is exchanged at. @defaultValue the account file's token_uri */
  readonly fcmTokenUrl: string | undefined;
  /** Base URL of the FCM HTTP v1 API. @defaultValue 'https://fcm.googleapis.com' */
  readonly fcmBaseUrl: string;
  /**
   * An ONNX speaker-embedding model (input [1, frames, 80] fbank, output [1, D]) used instead of the built-in DSP
   * embedding; its SHA-256 is logged at start-up and named with every stored embedding. @defaultValue undefined
   */
  readonly speakerModelPath: string | undefined;
}

export const STT_PROVIDER_NAMES = ['provider_a', 'provider_b', 'local'] as const;
export type SttProviderName = (typeof STT_PROVIDER_NAMES)[number];

export class ConfigError extends Error {
  readonly code = 'ENG_ERR_CONFIG_INVALID';
  constructor(readonly variable: string, reason: string) {
    super(`${variable}: ${reason}`);
    this.name = 'ConfigError';
  }
}

type Env = Readonly<Record<string, string | undefined>>;

/** Every variable this service reads; anything else is ignored. */
export const CONFIG_VARIABLES = [
  'HOST', 'PORT', 'ROLE', 'DATA_DIR', 'DATABASE_URL', 'DATABASE_SCHEMA', 'DATABASE_QUERY_TIMEOUT_MS', 'SQLITE_BUSY_TIMEOUT_MS', 'REDIS_URL', 'REDIS_PREFIX', 'REDIS_EMBEDDED',
  'LOG_LEVEL', 'MAX_BODY_BYTES', 'ID_TOKEN_JWKS_URL', 'ID_TOKEN_ISSUER', 'ID_TOKEN_AUDIENCE', 'ID_TOKEN_TTL_S',
  'ID_TOKEN_CLOCK_TOLERANCE_S', 'ID_TOKEN_CACHE_S', 'KEY_LAST_USED_INTERVAL_S', 'KEY_CACHE_TTL_S', 'SHUTDOWN_TIMEOUT_MS',
  'MEMORY_ACCESS_DEFAULT', 'RATE_LIMIT_PER_MINUTE', 'RATE_LIMIT_PER_DAY', 'RESPONSE_CACHE_BYTES', 'LLM_BASE_URL', 'LLM_API_KEY', 'LLM_MODEL',
  'LLM_TIMEOUT_MS', 'LLM_MAX_RETRIES', 'VAD_GATE', 'MAX_SESSIONS', 'MAX_SESSIONS_PER_USER', 'LISTEN_MAX_INBOUND_BYTES',
  'AUDIO_LOG_RETENTION_S', 'AUDIO_LOG_MAX_SESSION_BYTES', 'LOG_RETENTION_DAYS', 'NOTIFICATION_RETENTION_DAYS', 'AUDIO_LOG_MAX_NODE_BYTES', 'CODEC_THREADS', 'LISTEN_SHED_DECODE_DELAY_MS', 'LISTEN_SHED_STORE_DELAY_MS',
  'JOB_CONCURRENCY', 'STT_PROVIDERS', 'PROVIDER_A_URL', 'PROVIDER_A_API_KEY', 'PROVIDER_B_URL', 'PROVIDER_B_API_KEY',
  'CUSTOM_STT_URL', 'WEBHOOK_ALLOW_PRIVATE', 'FCM_SERVICE_ACCOUNT_FILE', 'FCM_TOKEN_URL', 'FCM_BASE_URL',
  'SPEAKER_MODEL_PATH',
] as const;

export const LOCAL_ISSUER = 'urn:wearable-backend:local-issuer';
export const LOCAL_AUDIENCE = 'wearable-backend';

function str(env: Env, name: string, fallback: string): string {
  const v = env[name];
  if (v === undefined || v === '') return fallback;
  if (v.trim() !== v) throw new ConfigError(name, 'must not have leading or trailing spaces');
  return v;
}

function optional(env: Env, name: string): string | undefined {
  const v = env[name];
  return v === undefined || v === '' ? undefined : str(env, name, '');
}

function int(env: Env, name: string, fallback: number, min: number, max: number): number {
  const v = env[name];
  if (v === undefined || v === '') return fallback;
  if (!/^-?\d+$/.test(v)) throw new ConfigError(name, `must be an integer, got "${v}"`);
  const n = Number(v);
  if (n < min || n > max) throw new ConfigError(name, `must be between ${min} and ${max}, got ${n}`);
  return n;
}

function oneOf<T extends string>(env: Env, name: string, allowed: readonly T[], fallback: T): T {
  const v = str(env, name, fallback);
  if (!(allowed as readonly string[]).includes(v)) {
    throw new ConfigError(name, `must be one of ${allowed.join(', ')}, got "${v}"`);
  }
  return v as T;
}

function url(env: Env, name: string, protocols: readonly string[], fallback?: string): string | undefined {
  const v = fallback === undefined ? optional(env, name) : str(env, name, fallback);
  if (v === undefined) return undefined;
  let parsed: URL;
  try {
    parsed = new URL(v);
  } catch {
    throw new ConfigError(name, 'must be a URL');
  }
  if (!protocols.includes(parsed.protocol)) {
    throw new ConfigError(name, `must use ${protocols.map((p) => p.replace(':', '://')).join(' or ')}`);
  }
  return v;
}

/** REDIS_URL: one server (redis://, rediss://) or a Redis Cluster's seed nodes (redis+cluster://, rediss+cluster://). */
function redisUrl(env: Env): string {
  const v = str(env, 'REDIS_URL', 'redis://127.0.0.1:6379');
  if (isClusterUrl(v)) {
    try {
      parseClusterUrl(v);
    } catch (err) {
      throw new ConfigError('REDIS_URL', (err as Error).message);
    }
  } else if (!URL.canParse(v) || !['redis:', 'rediss:'].includes(new URL(v).protocol)) {
    throw new ConfigError('REDIS_URL', `must use redis:// or rediss://, or ${CLUSTER_URL_FORM} for a Redis Cluster`);
  }
  return v;
}

/**
 * loadConfig() for a command-line entry point: a bad variable prints one line naming it and its rule, and the
 * process exits with status 2, as the service does at start.
 */
export function loadConfigOrExit(env: Env = process.env): Config {
  try {
    return loadConfig(env);
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    process.stderr.write(`configuration error: ${err.message}\n`);
    process.exit(2);
  }
}

/**
 * Reads and validates the configuration. Throws ConfigError naming the first bad variable.
 * @param env - the environment to read; defaults to process.env (the only place the service touches it)
 */
export function loadConfig(env: Env = process.env): Config {
  const jwksUrl = url(env, 'ID_TOKEN_JWKS_URL', ['https:', 'http:']);
  const issuer = optional(env, 'ID_TOKEN_ISSUER');
  const audience = optional(env, 'ID_TOKEN_AUDIENCE');
  if (jwksUrl !== undefined && (issuer === undefined || audience === undefined)) {
    throw new ConfigError(issuer === undefined ? 'ID_TOKEN_ISSUER' : 'ID_TOKEN_AUDIENCE', 'is required when ID_TOKEN_JWKS_URL is set');
  }
  const prefix = str(env, 'REDIS_PREFIX', 'svc');
  if (!/^[A-Za-z0-9_.:-]{1,64}$/.test(prefix)) {
    throw new ConfigError('REDIS_PREFIX', 'must be 1-64 characters of letters, digits, _ . : -');
  }
  const schema = str(env, 'DATABASE_SCHEMA', 'public');
  if (!/^[a-z_][a-z0-9_]{0,62}$/.test(schema)) {
    throw new ConfigError('DATABASE_SCHEMA', 'must be a lower-case SQL identifier');
  }
  const host = str(env, 'HOST', '0.0.0.0');
  if (!/^[0-9a-fA-F:.]+$|^localhost$/.test(host)) throw new ConfigError('HOST', `must be an IP address or localhost, got "${host}"`);

  const config: Config = {
    host,
    port: int(env, 'PORT', 8080, 0, 65535),
    role: oneOf(env, 'ROLE', ROLES, 'all'),
    dataDir: path.resolve(str(env, 'DATA_DIR', './data')),
    databaseUrl: url(env, 'DATABASE_URL', ['postgres:', 'postgresql:']),
    databaseSchema: schema,
    sqliteBusyTimeoutMs: int(env, 'SQLITE_BUSY_TIMEOUT_MS', 5000, 1, 600_000),
    databaseQueryTimeoutMs: int(env, 'DATABASE_QUERY_TIMEOUT_MS', 30_000, 0, 3_600_000),
    redisUrl: redisUrl(env),
    redisPrefix: prefix,
    redisEmbedded: oneOf(env, 'REDIS_EMBEDDED', ['auto', 'never'] as const, 'auto'),
    logLevel: oneOf(env, 'LOG_LEVEL', LOG_LEVELS, 'info'),
    maxBodyBytes: int(env, 'MAX_BODY_BYTES', 1024 * 1024, 1024, 256 * 1024 * 1024),
    idTokenJwksUrl: jwksUrl,
    idTokenIssuer: issuer ?? LOCAL_ISSUER,
    idTokenAudience: audience ?? LOCAL_AUDIENCE,
    idTokenTtlS: int(env, 'ID_TOKEN_TTL_S', 3600, 60, 30 * 24 * 3600),
    idTokenClockToleranceS: int(env, 'ID_TOKEN_CLOCK_TOLERANCE_S', 30, 0, 600),
    idTokenCacheS: int(env, 'ID_TOKEN_CACHE_S', 300, 0, 3600),
    keyLastUsedIntervalS: int(env, 'KEY_LAST_USED_INTERVAL_S', 60, 0, 86400),
    keyCacheTtlS: int(env, 'KEY_CACHE_TTL_S', 60, 0, 3600),
    shutdownTimeoutMs: int(env, 'SHUTDOWN_TIMEOUT_MS', 30_000, 100, 10 * 60_000),
    memoryAccessDefault: oneOf(env, 'MEMORY_ACCESS_DEFAULT', ['enabled', 'disabled'] as const, 'enabled'),
    rateLimitPerMinute: int(env, 'RATE_LIMIT_PER_MINUTE', 100, 1, 10_000_000),
    rateLimitPerDay: int(env, 'RATE_LIMIT_PER_DAY', 10_000, 1, 1_000_000_000),
    responseCacheBytes: int(env, 'RESPONSE_CACHE_BYTES', 64 * 1024 * 1024, 0, 16 * 1024 * 1024 * 1024),
    llmBaseUrl: url(env, 'LLM_BASE_URL', ['https:', 'http:']),
    llmApiKey: optional(env, 'LLM_API_KEY'),
    llmModel: str(env, 'LLM_MODEL', 'gpt-4.1-mini'),
    llmTimeoutMs: int(env, 'LLM_TIMEOUT_MS', 30_000, 100, 600_000),
    llmMaxRetries: int(env, 'LLM_MAX_RETRIES', 2, 0, 10),
    vadGate: oneOf(env, 'VAD_GATE', ['on', 'off'] as const, 'on') === 'on',
    maxSessions: int(env, 'MAX_SESSIONS', defaultMaxSessions(), 1, 1_000_000),
    maxSessionsPerUser: int(env, 'MAX_SESSIONS_PER_USER', 4, 1, 1000),
    listenMaxInboundBytes: int(env, 'LISTEN_MAX_INBOUND_BYTES', 1024 * 1024, 64 * 1024, 256 * 1024 * 1024),
    audioLogRetentionS: int(env, 'AUDIO_LOG_RETENTION_S', 3600, 0, 30 * 86400),
    logRetentionDays: int(env, 'LOG_RETENTION_DAYS', 30, 0, 3650),
    notificationRetentionDays: int(env, 'NOTIFICATION_RETENTION_DAYS', 90, 0, 3650),
    audioLogMaxSessionBytes: int(env, 'AUDIO_LOG_MAX_SESSION_BYTES', 128 * 1024 * 1024, 64 * 1024, 64 * 1024 * 1024 * 1024),
    audioLogMaxNodeBytes: int(env, 'AUDIO_LOG_MAX_NODE_BYTES', 4 * 1024 * 1024 * 1024, 1024 * 1024, 1024 * 1024 * 1024 * 1024),
    codecThreads: int(env, 'CODEC_THREADS', 0, 0, 256),
    listenShedDecodeDelayMs: int(env, 'LISTEN_SHED_DECODE_DELAY_MS', 300, 0, 60_000),
    listenShedStoreDelayMs: int(env, 'LISTEN_SHED_STORE_DELAY_MS', 2000, 0, 600_000),
    jobConcurrency: int(env, 'JOB_CONCURRENCY', 16, 1, 256),
    ...sttConfig(env),
    customSttUrl: url(env, 'CUSTOM_STT_URL', ['wss:', 'ws:']),
    webhookAllowPrivate: oneOf(env, 'WEBHOOK_ALLOW_PRIVATE', ['on', 'off'] as const, 'off') === 'on',
    fcmServiceAccountFile: serviceAccountFile(env),
    fcmTokenUrl: url(env, 'FCM_TOKEN_URL', ['https:', 'http:']),
    fcmBaseUrl: (url(env, 'FCM_BASE_URL', ['https:', 'http:']) ?? 'https://fcm.googleapis.com').replace(/\/+$/, ''),
    speakerModelPath: speakerModelPath(env),
  };
  return Object.freeze(config);
}

/** SPEAKER_MODEL_PATH, resolved, once it is seen to be a readable file (start-up loads and checks the model itself). */
function speakerModelPath(env: Env): string | undefined {
  const file = optional(env, 'SPEAKER_MODEL_PATH');
  if (file === undefined) return undefined;
  const resolved = path.resolve(file);
  try {
    fs.accessSync(resolved, fs.constants.R_OK);
    if (!fs.statSync(resolved).isFile()) throw new Error('not a file');
  } catch {
    throw new ConfigError('SPEAKER_MODEL_PATH', `${resolved} is not a readable file`);
  }
  return resolved;
}

/** FCM_SERVICE_ACCOUNT_FILE, resolved, once its content is seen to be a usable service account. */
function serviceAccountFile(env: Env): string | undefined {
  const file = optional(env, 'FCM_SERVICE_ACCOUNT_FILE');
  if (file === undefined) return undefined;
  const resolved = path.resolve(file);
  try {
    readServiceAccount(resolved);
  } catch (err) {
    throw new ConfigError('FCM_SERVICE_ACCOUNT_FILE', (err as Error).message);
  }
  return resolved;
}

/** STT_PROVIDERS and the provider endpoints: a provider named in the list must have its key. */
function sttConfig(env: Env): Pick<Config, 'sttProviders' | 'providerAUrl' | 'providerAApiKey' | 'providerBUrl' | 'providerBApiKey'> {
  const providerAApiKey = optional(env, 'PROVIDER_A_API_KEY');
  const providerBApiKey = optional(env, 'PROVIDER_B_API_KEY');
  const keyed = { provider_a: providerAApiKey, provider_b: providerBApiKey, local: 'none needed' } as const;
  const listed = optional(env, 'STT_PROVIDERS');
  let sttProviders: SttProviderName[];
  if (listed === undefined) {
    sttProviders = STT_PROVIDER_NAMES.filter((n) => keyed[n] !== undefined);
  } else {
    sttProviders = [];
    for (const raw of listed.split(',')) {
      const name = raw.trim();
      if (!(STT_PROVIDER_NAMES as readonly string[]).includes(name)) throw new ConfigError('STT_PROVIDERS', `unknown provider "${name}"; use ${STT_PROVIDER_NAMES.join(', ')}`);
      if (sttProviders.includes(name as SttProviderName)) throw new ConfigError('STT_PROVIDERS', `"${name}" is listed twice`);
      if (keyed[name as SttProviderName] === undefined) throw new ConfigError('STT_PROVIDERS', `${name} is listed but ${name === 'provider_a' ? 'PROVIDER_A_API_KEY' : 'PROVIDER_B_API_KEY'} is not set`);
      sttProviders.push(name as SttProviderName);
    }
  }
  return {
    sttProviders: Object.freeze(sttProviders),
    providerAUrl: url(env, 'PROVIDER_A_URL', ['wss:', 'ws:']) ?? 'wss://api.deepgram.com/v1/listen',
    providerAApiKey,
    providerBUrl: url(env, 'PROVIDER_B_URL', ['wss:', 'ws:']) ?? 'wss://stt-rt.soniox.com/transcribe-websocket',
    providerBApiKey,
  };
}
