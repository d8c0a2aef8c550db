// Configuration: every setting's default, a value it takes and a value it refuses naming the variable; a frozen result.
import t from 'tap';
import path from 'node:path';
import { writeFileSync } from 'node:fs';
import { loadConfig, defaultMaxSessions, CONFIG_VARIABLES, LOCAL_AUDIENCE, LOCAL_ISSUER, type Config } from '../../engine/config.js';
import { writeServiceAccount } from '../fakes/fcm-server.js';

const serviceAccount = writeServiceAccount();
const notJson = path.join(path.dirname(serviceAccount.file), 'not-json.json');
writeFileSync(notJson, 'private_key=...');

type Variable = (typeof CONFIG_VARIABLES)[number];
type Env = Record<string, string>;

interface Setting {
  /** The Config field the variable sets. */
  field: keyof Config;
  /** The field with nothing set. */
  default: unknown;
  /** A valid value other than the default, and what the field then holds. */
  set: readonly [string, unknown];
  /** Values refused at start-up, each naming this variable. */
  bad: readonly string[];
  /** Other variables its values need. */
  with?: Env;
}


const MiB = 1024 * 1024;

// One row per variable: a variable added to CONFIG_VARIABLES without a row here does not typecheck.
const SETTINGS = {
  HOST: { field: 'host', default: '0.0.0.0', set: ['127.0.0.1', '127.0.0.1'], bad: ['my host', 'example.org'] },
  PORT: { field: 'port', default: 8080, set: ['0', 0], bad: ['eighty', '70000', '-1', '80.5'] },
  ROLE: { field: 'role', default: 'all', set: ['api', 'api'], bad: ['everything', 'API'] },
  DATA_DIR: { field: 'dataDir', default: path.resolve('./data'), set: ['/srv/wearable', '/srv/wearable'], bad: [' ./data'] },
  DATABASE_URL: { field: 'databaseUrl', default: undefined, set: ['postgres://u@h/db', 'postgres://u@h/db'], bad: ['mysql://x/y', 'not a url'] },
  DATABASE_SCHEMA: { field: 'databaseSchema', default: 'public', set: ['tenant_1', 'tenant_1'], bad: ['Robert"); drop', 'Public', '1st'] },
  DATABASE_QUERY_TIMEOUT_MS: { field: 'databaseQueryTimeoutMs', default: 30_000, set: ['0', 0], bad: ['-1', '3600001', '30s'] },
  SQLITE_BUSY_TIMEOUT_MS: { field: 'sqliteBusyTimeoutMs', default: 5000, set: ['250', 250], bad: ['0', '600001'] },
  REDIS_URL: { field: 'redisUrl', default: 'redis://127.0.0.1:6379', set: ['rediss://cache:6380', 'rediss://cache:6380'], bad: ['http://127.0.0.1:6379', 'not a url'] },
  REDIS_PREFIX: { field: 'redisPrefix', default: 'svc', set: ['prod:eu-1', 'prod:eu-1'], bad: ['has space', 'x'.repeat(65)] },
  REDIS_EMBEDDED: { field: 'redisEmbedded', default: 'auto', set: ['never', 'never'], bad: ['sometimes'] },
  LOG_LEVEL: { field: 'logLevel', default: 'info', set: ['warn', 'warn'], bad: ['loud'] },
  MAX_BODY_BYTES: { field: 'maxBodyBytes', default: MiB, set: ['2048', 2048], bad: ['1.5', '10', '64MB'] },
  ID_TOKEN_JWKS_URL: {
    field: 'idTokenJwksUrl',
    default: undefined,
    set: ['https://idp.example/jwks', 'https://idp.example/jwks'],
    bad: ['ftp://idp/jwks', 'not a url'],
    with: { ID_TOKEN_ISSUER: 'https://idp.example/', ID_TOKEN_AUDIENCE: 'wearable-app' },
  },
  ID_TOKEN_ISSUER: { field: 'idTokenIssuer', default: LOCAL_ISSUER, set: ['https://idp.example/', 'https://idp.example/'], bad: [' https://idp.example/'] },
  ID_TOKEN_AUDIENCE: { field: 'idTokenAudience', default: LOCAL_AUDIENCE, set: ['wearable-app', 'wearable-app'], bad: ['wearable-app '] },
  ID_TOKEN_TTL_S: { field: 'idTokenTtlS', default: 3600, set: ['600', 600], bad: ['0', '59', String(30 * 24 * 3600 + 1)] },
  ID_TOKEN_CLOCK_TOLERANCE_S: { field: 'idTokenClockToleranceS', default: 30, set: ['0', 0], bad: ['601', '-1'] },
  ID_TOKEN_CACHE_S: { field: 'idTokenCacheS', default: 300, set: ['0', 0], bad: ['3601'] },
  KEY_LAST_USED_INTERVAL_S: { field: 'keyLastUsedIntervalS', default: 60, set: ['0', 0], bad: ['x', '86401'] },
  KEY_CACHE_TTL_S: { field: 'keyCacheTtlS', default: 60, set: ['5', 5], bad: ['-1', '3601'] },
  SHUTDOWN_TIMEOUT_MS: { field: 'shutdownTimeoutMs', default: 30_000, set: ['1000', 1000], bad: ['5', '600001'] },
  MEMORY_ACCESS_DEFAULT: { field: 'memoryAccessDefault', default: 'enabled', set: ['disabled', 'disabled'], bad: ['on'] },
  RATE_LIMIT_PER_MINUTE: { field: 'rateLimitPerMinute', default: 100, set: ['10000000', 10_000_000], bad: ['0', '10000001'] },
  RATE_LIMIT_PER_DAY: { field: 'rateLimitPerDay', default: 10_000, set: ['50', 50], bad: ['0'] },
  RESPONSE_CACHE_BYTES: { field: 'responseCacheBytes', default: 64 * MiB, set: ['0', 0], bad: ['-1', '64MB'] },
  LLM_BASE_URL: { field: 'llmBaseUrl', default: undefined, set: ['http://127.0.0.1:11434/v1', 'http://127.0.0.1:11434/v1'], bad: ['ftp://llm/v1'] },
  LLM_API_KEY: { field: 'llmApiKey', default: undefined, set: ['sk-test', 'sk-test'], bad: [' sk-test'] },
  LLM_MODEL: { field: 'llmModel', default: 'gpt-4.1-mini', set: ['llama3', 'llama3'], bad: ['llama3 '] },
  LLM_TIMEOUT_MS: { field: 'llmTimeoutMs', default: 30_000, set: ['5000', 5000], bad: ['99', '600001'] },
  LLM_MAX_RETRIES: { field: 'llmMaxRetries', default: 2, set: ['0', 0], bad: ['11'] },
  VAD_GATE: { field: 'vadGate', default: true, set: ['off', false], bad: ['yes', 'true'] },
  MAX_SESSIONS: { field: 'maxSessions', default: defaultMaxSessions(), set: ['1', 1], bad: ['0'] },
  MAX_SESSIONS_PER_USER: { field: 'maxSessionsPerUser', default: 4, set: ['1', 1], bad: ['0', '1001'] },
  LISTEN_MAX_INBOUND_BYTES: { field: 'listenMaxInboundBytes', default: MiB, set: ['65536', 65536], bad: ['65535'] },
  AUDIO_LOG_RETENTION_S: { field: 'audioLogRetentionS', default: 3600, set: ['60', 60], bad: ['-1', '1h'] },
  LOG_RETENTION_DAYS: { field: 'logRetentionDays', default: 30, set: ['0', 0], bad: ['-1', '3651', '30d'] },
  NOTIFICATION_RETENTION_DAYS: { field: 'notificationRetentionDays', default: 90, set: ['7', 7], bad: ['3651', 'x'] },
  AUDIO_LOG_MAX_SESSION_BYTES: { field: 'audioLogMaxSessionBytes', default: 128 * MiB, set: ['1048576', MiB], bad: ['1000'] },
  AUDIO_LOG_MAX_NODE_BYTES: { field: 'audioLogMaxNodeBytes', default: 4096 * MiB, set: ['1048576', MiB], bad: ['1000', 'lots'] },
  CODEC_THREADS: { field: 'codecThreads', default: 0, set: ['2', 2], bad: ['257', 'all'] },
  LISTEN_SHED_DECODE_DELAY_MS: { field: 'listenShedDecodeDelayMs', default: 300, set: ['0', 0], bad: ['60001', '-1'] },
  LISTEN_SHED_STORE_DELAY_MS: { field: 'listenShedStoreDelayMs', default: 2000, set: ['0', 0], bad: ['600001', '2s'] },
  JOB_CONCURRENCY: { field: 'jobConcurrency', default: 16, set: ['64', 64], bad: ['0', '257'] },
  STT_PROVIDERS: {
    field: 'sttProviders',
    default: ['local'],
    set: ['local, provider_b', ['local', 'provider_b']],
    bad: ['whisper', 'local,local', 'provider_a'],
    with: { PROVIDER_B_API_KEY: 'b' },
  },
  PROVIDER_A_URL: { field: 'providerAUrl', default: 'wss://api.deepgram.com/v1/listen', set: ['ws://127.0.0.1:9/x', 'ws://127.0.0.1:9/x'], bad: ['https://api.deepgram.com/v1/listen'] },
  PROVIDER_A_API_KEY: { field: 'providerAApiKey', default: undefined, set: ['a', 'a'], bad: [' a'] },
  PROVIDER_B_URL: { field: 'providerBUrl', default: 'wss://stt-rt.soniox.com/transcribe-websocket', set: ['ws://127.0.0.1:9/x', 'ws://127.0.0.1:9/x'], bad: ['http://127.0.0.1:9/x'] },
  PROVIDER_B_API_KEY: { field: 'providerBApiKey', default: undefined, set: ['b', 'b'], bad: ['b '] },
  CUSTOM_STT_URL: {
    field: 'customSttUrl',
    default: undefined,
    set: ['wss://stt.example.org/stream?key=1', 'wss://stt.example.org/stream?key=1'],
    bad: ['https://stt.example.org/stream', 'not a url', ' ws://127.0.0.1:9000/'],
  },
  WEBHOOK_ALLOW_PRIVATE: { field: 'webhookAllowPrivate', default: false, set: ['on', true], bad: ['yes', 'true', 'ON'] },
  FCM_SERVICE_ACCOUNT_FILE: { field: 'fcmServiceAccountFile', default: undefined, set: [serviceAccount.file, serviceAccount.file], bad: ['/nonexistent/sa.json', notJson] },
  FCM_TOKEN_URL: { field: 'fcmTokenUrl', default: undefined, set: ['http://127.0.0.1:9/token', 'http://127.0.0.1:9/token'], bad: ['ftp://x/token', 'token'] },
  FCM_BASE_URL: { field: 'fcmBaseUrl', default: 'https://fcm.googleapis.com', set: ['http://127.0.0.1:9/', 'http://127.0.0.1:9'], bad: ['ws://127.0.0.1:9'] },
  // Any readable file passes here; start-up loads it and refuses one that is not a speaker model.
  SPEAKER_MODEL_PATH: { field: 'speakerModelPath', default: undefined, set: [notJson, notJson], bad: ['/nonexistent/model.onnx', path.dirname(notJson)] },
} satisfies Record<Variable, Setting>;

for (const [variable, s] of Object.entries(SETTINGS) as [Variable, Setting][]) {
  t.test(variable, async (t) => {
    t.same(loadConfig({})[s.field], s.default, 'its default');
    t.notSame(s.set[1], s.default, 'the value tried is not the default');
    t.same(loadConfig({ ...s.with, [variable]: s.set[0] })[s.field], s.set[1], `${variable}=${JSON.stringify(s.set[0])}`);
    for (const value of s.bad) {
      t.throws(() => loadConfig({ ...s.with, [variable]: value }), { name: 'ConfigError', code: 'ENG_ERR_CONFIG_INVALID', variable }, `refuses ${JSON.stringify(value)}`);
    }
  });
}

t.test('an empty value means the default; the result is frozen', async (t) => {
  t.equal(loadConfig({ PORT: '' }).port, 8080);
  t.equal(loadConfig({ DATABASE_URL: '' }).databaseUrl, undefined);
  t.ok(Object.isFrozen(loadConfig({})));
  t.ok(Object.isFrozen(loadConfig({}).sttProviders));
});

t.test('the message start-up prints begins with the variable', async (t) => {
  // engine/index.ts prints "configuration error: <message>" and exits: the operator reads the variable first.
  t.throws(() => loadConfig({ PORT: 'eighty' }), { message: /^PORT: / });
  t.throws(() => loadConfig({ STT_PROVIDERS: 'provider_a' }), { variable: 'STT_PROVIDERS', message: /PROVIDER_A_API_KEY/ }, 'a provider listed without its key names the key to set');
});

t.test('a JWKS URL needs its issuer and audience', async (t) => {
  const jwks = 'https://idp.example/jwks';
  t.throws(() => loadConfig({ ID_TOKEN_JWKS_URL: jwks, ID_TOKEN_AUDIENCE: 'a' }), { code: 'ENG_ERR_CONFIG_INVALID', variable: 'ID_TOKEN_ISSUER' });
  t.throws(() => loadConfig({ ID_TOKEN_JWKS_URL: jwks, ID_TOKEN_ISSUER: 'i' }), { code: 'ENG_ERR_CONFIG_INVALID', variable: 'ID_TOKEN_AUDIENCE' });
});

t.test('speech providers by default: those with keys, in order, then local', async (t) => {
  t.same(loadConfig({ PROVIDER_B_API_KEY: 'b', PROVIDER_A_API_KEY: 'a' }).sttProviders, ['provider_a', 'provider_b', 'local']);
  t.same(loadConfig({ PROVIDER_B_API_KEY: 'b' }).sttProviders, ['provider_b', 'local']);
});

t.test("MAX_SESSIONS unset follows the node's cores: more cores hold more sessions, one core still some", async (t) => {
  t.equal(defaultMaxSessions(1), 400);
  t.equal(defaultMaxSessions(2), 850);
  t.equal(defaultMaxSessions(8), 3400);
  for (const cores of [1, 2, 3, 4, 16, 64]) t.ok(defaultMaxSessions(cores) % 50 === 0 && defaultMaxSessions(cores) >= 50, `${cores} cores: a multiple of 50`);
});

t.test('every variable has a row in the README configuration table', async (t) => {
  const { readFileSync } = await import('node:fs');
  const readme = readFileSync(new URL('../../../README.md', import.meta.url), 'utf8');
  for (const v of CONFIG_VARIABLES) t.match(readme, new RegExp(`\\| \`${v}\` \\|`), v);
});
