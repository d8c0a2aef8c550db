// Starts the real service in-process on 127.0.0.1:0 with its own data dir, Redis prefix and (optionally) PostgreSQL schema.
import { randomUUID } from 'node:crypto';
import type { Test } from 'tap';
import { loadConfig } from '../../engine/config.js';
import { Service, type ServiceOptions } from '../../engine/app.js';
import { ManualClock, type Clock } from '../../engine/clock.js';
import { LocalIssuer } from '../../engine/identity/id-tokens.js';
import { createLogger, type Logger } from '../../engine/logger.js';
import { storeEnv, type StoreKind } from './stores.js';
import { request, bearer, type TestRequest, type TestResponse } from './http.js';
import { suiteScanLogger } from './log-capture.js';

export interface TestService {
  service: Service;
  url: string;
  clock: ManualClock;
  dataDir: string;
  env: Record<string, string>;
  /** An ID token for `uid` from the service's local issuer. */
  token(uid: string, ttlS?: number): Promise<string>;
  req(path: string, opts?: TestRequest): Promise<TestResponse>;
  /** Creates a developer key for `uid` through the API and returns the secret. */
  devKey(uid: string, scopes?: string[]): Promise<string>;
}

export interface StartOptions {
  store?: StoreKind;
  env?: Record<string, string>;
  clock?: ManualClock;
  /** Share another service's data dir, store and Redis prefix (a second node of one deployment). */
  sameDeploymentAs?: TestService;
  extraRoutes?: ServiceOptions['extraRoutes'];
  /** STT engines for live sessions (default: the service default, the local PocketSphinx engine behind the speech gate). */
  sttEngines?: ServiceOptions['sttEngines'];
  /** The codec shards' worker module (a fixture such as test/helpers/slow-decode-worker.ts). */
  codecWorker?: string;
  /** Tuning constants to override (ServiceOptions.tuning). */
  tuning?: ServiceOptions['tuning'];
  /** Resolves webhook destinations (ServiceOptions.webhookResolver). */
  webhookResolver?: ServiceOptions['webhookResolver'];
  /** The test checks itself how the service's stop() fails: the teardown's stop() does not throw it again. */
  stopMayFail?: boolean;
  /** Where the service logs (default: a logger at TEST_LOG_LEVEL, silent unless set; with LOG_SCAN_DIR, trace logs to a file there). */
  logger?: Logger;
  /** Handed each stored reply of a live transcript endpoint (ServiceOptions.onAppReply). */
  onAppReply?: ServiceOptions['onAppReply'];
  /** Where live webhook drops are reported (ServiceOptions.liveDeliveryLog). */
  liveDeliveryLog?: ServiceOptions['liveDeliveryLog'];
  /** Scheduler interval; default 0: tests drive timers with `service.scheduler.tick()` after `clock.advance()`. */
  schedulerResolutionMs?: number;
}

/** A service still stopping after this long fails its test's teardown, naming the step it is in. */
const STOP_WATCHDOG_MS = 60_000;

export async function startService(t: Test, opts: StartOptions = {}): Promise<TestService> {
  const clock = opts.clock ?? new ManualClock(Date.now());
  const env: Record<string, string> = opts.sameDeploymentAs
    ? { ...opts.sameDeploymentAs.env, ...opts.env }
    : {
        HOST: '127.0.0.1',
        PORT: '0',
        // t.testdir() empties the directory each call: only call it when the caller gave none.
        DATA_DIR: opts.env?.DATA_DIR ?? t.testdir(),
        REDIS_URL: process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379',
        REDIS_PREFIX: `test-${randomUUID()}`,
        REDIS_EMBEDDED: 'never',
        LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent',
        ...storeEnv(t, opts.store ?? 'sqlite'),
        ...opts.env,
      };
  const config = loadConfig(env);
  const service = await Service.start({
    config,
    clock: clock as Clock,
    logger: opts.logger ?? suiteScanLogger() ?? createLogger(config.logLevel),
    ...(opts.extraRoutes ? { extraRoutes: opts.extraRoutes } : {}),
    ...(opts.sttEngines ? { sttEngines: opts.sttEngines } : {}),
    ...(opts.codecWorker ? { codecWorker: opts.codecWorker } : {}),
    ...(opts.tuning ? { tuning: opts.tuning } : {}),
    ...(opts.webhookResolver ? { webhookResolver: opts.webhookResolver } : {}),
    ...(opts.onAppReply ? { onAppReply: opts.onAppReply } : {}),
    ...(opts.liveDeliveryLog ? { liveDeliveryLog: opts.liveDeliveryLog } : {}),
    schedulerResolutionMs: opts.schedulerResolutionMs ?? 0,
  });
  t.teardown(async () => {
    // Shutdown waits on timers of the injected clock: sessions still draining (their client gone) on Finalize and
    // CloseStream, a provider stream whose session already ended on the provider's close after CloseStream. Move it
    // while shutdown runs, as time would, or shutdown waits on a clock that never moves (a drain then took the whole
    // SHUTDOWN_TIMEOUT_MS and the file timed out on a loaded machine). A step that still does not end is named: the
    // file would otherwise time out with nothing to say where it stuck.
    let stopped = false;
    let failure: Error | undefined;
    const stopping = service.stop().then(
      () => (stopped = true),
      (err: Error) => {
        failure = err;
        stopped = true;
      },
    );
    const started = Date.now();
    while (!stopped) {
      if (Date.now() - started > STOP_WATCHDOG_MS) throw new Error(`service.stop() still in its "${service.stopStep}" step after ${STOP_WATCHDOG_MS} ms`);
      clock.advance(500);
      await Promise.race([stopping, service.scheduler.tick()]);
      await Promise.race([stopping, new Promise((r) => setTimeout(r, 10))]);
    }
    await stopping;
    if (failure !== undefined && !opts.stopMayFail) throw failure;
  });
  const url = `http://127.0.0.1:${service.port}`;
  let issuer: LocalIssuer | undefined;
  const ts: TestService = {
    service,
    url,
    clock,
    dataDir: config.dataDir,
    env,
    async token(uid, ttlS = 3600) {
      issuer ??= await LocalIssuer.open(config.dataDir, { issuer: config.idTokenIssuer, audience: config.idTokenAudience, clockToleranceS: 0, clock });
      return issuer.sign(uid, ttlS);
    },
    req: (path, o) => request(url, path, o),
    async devKey(uid, scopes) {
      const res = await request(url, '/v1/dev/keys', { method: 'POST', headers: bearer(await ts.token(uid)), body: { name: 'test key', ...(scopes ? { scopes } : {}) } });
      if (res.status !== 200) throw new Error(`key creation failed: ${res.status} ${res.text}`);
      return res.json.key as string;
    },
  };
  return ts;
}
