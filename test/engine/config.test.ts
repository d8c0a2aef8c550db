// Configuration: defaults, validation that names the bad variable, and a frozen result.
import t from 'tap';
import path from 'node:path';
import { loadConfig, ConfigError, CONFIG_VARIABLES } from '../../engine/config.js';

t.test('defaults', async (t) => {
  const c = loadConfig({});
  t.equal(c.host, '0.0.0.0');
  t.equal(c.port, 8080);
  t.equal(c.role, 'all');
  t.equal(c.dataDir, path.resolve('./data'));
  t.equal(c.databaseUrl, undefined);
  t.equal(c.redisUrl, 'redis://127.0.0.1:6379');
  t.equal(c.redisEmbedded, 'auto');
  t.equal(c.logLevel, 'info');
  t.equal(c.maxBodyBytes, 1024 * 1024);
  t.equal(c.idTokenTtlS, 3600);
  t.equal(c.keyLastUsedIntervalS, 60);
  t.equal(c.responseCacheBytes, 64 * 1024 * 1024);
  t.ok(Object.isFrozen(c));
});

t.test('values are read and converted', async (t) => {
  const c = loadConfig({ PORT: '0', HOST: '127.0.0.1', DATABASE_URL: 'postgres://u@h/db', LOG_LEVEL: 'warn', MAX_BODY_BYTES: '2048', ROLE: 'api' });
  t.equal(c.port, 0);
  t.equal(c.host, '127.0.0.1');
  t.equal(c.databaseUrl, 'postgres://u@h/db');
  t.equal(c.logLevel, 'warn');
  t.equal(c.maxBodyBytes, 2048);
  t.equal(c.role, 'api');
  t.equal(loadConfig({ PORT: '' }).port, 8080, 'an empty value means the default');
  t.equal(loadConfig({ RESPONSE_CACHE_BYTES: '0' }).responseCacheBytes, 0, '0 keeps no answers');
  t.equal(loadConfig({}).listenLoopPaceMs, 5, 'the loop is paced under load by default');
  t.equal(loadConfig({ LISTEN_LOOP_PACE_MS: '0' }).listenLoopPaceMs, 0, '0: never paced');
});

const bad: [Record<string, string>, string][] = [
  [{ PORT: 'eighty' }, 'PORT'],
  [{ PORT: '70000' }, 'PORT'],
  [{ PORT: '-1' }, 'PORT'],
  [{ HOST: 'my host' }, 'HOST'],
  [{ ROLE: 'everything' }, 'ROLE'],
  [{ LISTEN_LOOP_PACE_MS: '51' }, 'LISTEN_LOOP_PACE_MS'],
  [{ LISTEN_LOOP_PACE_MS: '2.5' }, 'LISTEN_LOOP_PACE_MS'],
  [{ LOG_LEVEL: 'loud' }, 'LOG_LEVEL'],
  [{ DATABASE_URL: 'mysql://x/y' }, 'DATABASE_URL'],
  [{ DATABASE_URL: 'not a url' }, 'DATABASE_URL'],
  [{ DATABASE_SCHEMA: 'Robert"); drop' }, 'DATABASE_SCHEMA'],
  [{ REDIS_URL: 'http://127.0.0.1:6379' }, 'REDIS_URL'],
  [{ REDIS_PREFIX: 'has space' }, 'REDIS_PREFIX'],
  [{ REDIS_EMBEDDED: 'sometimes' }, 'REDIS_EMBEDDED'],
  [{ MAX_BODY_BYTES: '1.5' }, 'MAX_BODY_BYTES'],
  [{ MAX_BODY_BYTES: '10' }, 'MAX_BODY_BYTES'],
  [{ ID_TOKEN_JWKS_URL: 'ftp://idp/jwks' }, 'ID_TOKEN_JWKS_URL'],
  [{ ID_TOKEN_JWKS_URL: 'https://idp/jwks', ID_TOKEN_AUDIENCE: 'a' }, 'ID_TOKEN_ISSUER'],
  [{ ID_TOKEN_JWKS_URL: 'https://idp/jwks', ID_TOKEN_ISSUER: 'i' }, 'ID_TOKEN_AUDIENCE'],
  [{ ID_TOKEN_TTL_S: '0' }, 'ID_TOKEN_TTL_S'],
  [{ KEY_LAST_USED_INTERVAL_S: 'x' }, 'KEY_LAST_USED_INTERVAL_S'],
  [{ SHUTDOWN_TIMEOUT_MS: '5' }, 'SHUTDOWN_TIMEOUT_MS'],
  [{ RESPONSE_CACHE_BYTES: '-1' }, 'RESPONSE_CACHE_BYTES'],
  [{ RESPONSE_CACHE_BYTES: '64MB' }, 'RESPONSE_CACHE_BYTES'],
  [{ DATA_DIR: ' ./data' }, 'DATA_DIR'],
];

for (const [env, variable] of bad) {
  t.test(`bad ${variable}=${Object.values(env).join(',')}`, async (t) => {
    let caught: unknown;
    try {
      loadConfig(env);
    } catch (err) {
      caught = err;
    }
    t.ok(caught instanceof ConfigError, 'refused');
    t.equal((caught as ConfigError).variable, variable, 'names the variable');
    t.match((caught as ConfigError).message, new RegExp(`^${variable}: `));
  });
}

t.test('every variable has a row in the README configuration table', async (t) => {
  const { readFileSync } = await import('node:fs');
  const readme = readFileSync(new URL('../../../README.md', import.meta.url), 'utf8');
  for (const v of CONFIG_VARIABLES) t.match(readme, new RegExp(`\\| \`${v}\` \\|`), v);
});

t.test('speech providers: default order, explicit list, and the keys a list needs', async (t) => {
  t.same(loadConfig({}).sttProviders, ['local'], 'no keys: the local engine only');
  t.same(loadConfig({ PROVIDER_B_API_KEY: 'b', PROVIDER_A_API_KEY: 'a' }).sttProviders, ['provider_a', 'provider_b', 'local']);
  t.same(loadConfig({ PROVIDER_B_API_KEY: 'b', STT_PROVIDERS: 'provider_b, local' }).sttProviders, ['provider_b', 'local']);
  t.equal(loadConfig({}).providerAUrl, 'wss://api.deepgram.com/v1/listen');
  t.equal(loadConfig({ PROVIDER_B_URL: 'ws://127.0.0.1:9/x' }).providerBUrl, 'ws://127.0.0.1:9/x');
  const bad: [Record<string, string>, RegExp][] = [
    [{ STT_PROVIDERS: 'provider_a' }, /PROVIDER_A_API_KEY is not set/],
    [{ STT_PROVIDERS: 'local,whisper' }, /unknown provider "whisper"/],
    [{ STT_PROVIDERS: 'local,local' }, /listed twice/],
    [{ PROVIDER_A_URL: 'https://api.deepgram.com/v1/listen' }, /must use wss:\/\/ or ws:\/\//],
  ];
  for (const [env, message] of bad) {
    t.throws(() => loadConfig(env), message, JSON.stringify(env));
    try {
      loadConfig(env);
    } catch (err) {
      t.ok(err instanceof ConfigError, 'a ConfigError naming the variable');
    }
  }
});

t.test('custom transcription server URL: optional, ws or wss only', async (t) => {
  t.equal(loadConfig({}).customSttUrl, undefined, 'unset by default');
  t.equal(loadConfig({ CUSTOM_STT_URL: 'wss://stt.example.org/stream?key=1' }).customSttUrl, 'wss://stt.example.org/stream?key=1');
  t.equal(loadConfig({ CUSTOM_STT_URL: 'ws://127.0.0.1:9000/' }).customSttUrl, 'ws://127.0.0.1:9000/');
  for (const bad of ['https://stt.example.org/stream', 'not a url', ' ws://127.0.0.1:9000/']) {
    let caught: unknown;
    try {
      loadConfig({ CUSTOM_STT_URL: bad });
    } catch (err) {
      caught = err;
    }
    t.ok(caught instanceof ConfigError && caught.variable === 'CUSTOM_STT_URL', `refuses ${JSON.stringify(bad)}`);
  }
});
