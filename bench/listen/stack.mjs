// The processes a listen bench measures, each in its own process: the real service, the provider_a fake it streams PCM
// to, and the bare uWS baseline; plus ID tokens for many devices and the provider's /stats.
// One file because the processes it starts share ports, tokens and teardown.
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { BENCH_DIR, ROOT_DIR } from '../lib/report.mjs';
import { cleanRedis, serviceEnv, startChild, track } from '../lib/processes.mjs';

export const FAKE_PROVIDER = 'dist/test/fakes/deepgram-server.js';
/** The provider_b fake (Soniox's realtime protocol), for `--stt provider_b`. */
export const FAKE_PROVIDER_B = 'dist/test/fakes/soniox-server.js';
export const SERVICE_ENTRY = 'dist/engine/index.js';
/**
 * Node flags `npm start` runs the service with, read from package.json's start script (the V8 heap settings), so
 * the bench measures the service as it ships.
 */
export const SERVICE_NODE_ARGS = startScriptFlags(JSON.parse(readFileSync(path.join(ROOT_DIR, 'package.json'), 'utf8')).scripts.start);

/**
 * The `--` flags between `node` and the entry point of a start script (`node …` or `exec node …`: the shell npm starts
 * hands its process over to node).
 * @param {string} script
 * @returns {string[]}
 */
export function startScriptFlags(script) {
  const words = script.trim().split(/\s+/);
  if (words[0] === 'exec') words.shift();
  if (words[0] !== 'node') throw new Error(`package.json start script does not run node: ${script}`);
  const flags = [];
  for (const w of words.slice(1)) {
    if (!w.startsWith('--')) break;
    flags.push(w);
  }
  return flags;
}

/** More node flags for the service from BENCH_SERVICE_NODE_ARGS (space-separated), e.g. `--heapsnapshot-signal=SIGUSR2`. */
const extraNodeArgs = () => (process.env.BENCH_SERVICE_NODE_ARGS ?? '').split(/\s+/).filter(Boolean);
/** A /stats request slower than this means the process measured is overloaded (its reads starve). */
const STATS_TIMEOUT_MS = 5000;
/** The service with provider_a wired by the bench, for builds whose entry point does not use it yet. */
export const PROVIDER_A_ENTRY = path.join(BENCH_DIR, 'listen/provider-a-entry.mjs');

/**
 * Starts `node <args>` that prints `{"port":N}` as its first stdout line when it listens.
 * @param {string} name
 * @param {string[]} args
 */
async function startPortChild(name, args) {
  const proc = track(spawn(process.execPath, args, { cwd: ROOT_DIR, stdio: ['ignore', 'pipe', 'pipe'] }));
  let err = '';
  proc.stderr.on('data', (/** @type {Buffer} */ b) => (err = (err + b.toString()).slice(-4000)));
  const port = await new Promise((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error(`${name} printed no port within 20 s: ${err}`)), 20_000);
    proc.stdout.on('data', (/** @type {Buffer} */ b) => {
      out += b.toString();
      const line = out.split('\n').find((l) => l.includes('"port"'));
      if (!line) return;
      clearTimeout(timer);
      resolve(Number(JSON.parse(line).port));
    });
    proc.on('exit', (code) => reject(new Error(`${name} exited with ${code}: ${err}`)));
  });
  proc.stdout.resume();
  return {
    proc,
    port,
    pid: /** @type {number} */ (proc.pid),
    stats: new ProviderStats(`http://127.0.0.1:${port}`),
    async stop() {
      if (proc.exitCode !== null) return;
      const exited = new Promise((r) => proc.once('exit', r));
      proc.kill('SIGTERM');
      const t = setTimeout(() => proc.kill('SIGKILL'), 5000);
      await exited;
      clearTimeout(t);
    },
  };
}

/**
 * A provider fake in its own process, built to dist/: provider_a's (test/fakes/deepgram-server.ts: Deepgram's live
 * protocol, Results every ~2 s of audio) or provider_b's (test/fakes/soniox-server.ts: Soniox's realtime protocol,
 * an answer per audio message and a word every 2 s of audio). Both answer GET /stats and POST /stats/reset.
 * @param {string} key
 * @param {'provider_a' | 'provider_b'} [provider]
 */
export async function startFakeProvider(key, provider = 'provider_a') {
  const file = provider === 'provider_b' ? FAKE_PROVIDER_B : FAKE_PROVIDER;
  if (!existsSync(path.join(ROOT_DIR, file))) throw new Error(`${file} is missing: build the service (npm run build)`);
  return startPortChild(`${provider} fake`, [file, '--port', '0', '--key', key]);
}

/** The listen benches' webhook receiver (webhook-receiver.mjs) in its own process; `stats.get()` reads its counts. */
export async function startWebhookReceiver() {
  return startPortChild('webhook receiver', [path.join(BENCH_DIR, 'listen/webhook-receiver.mjs'), '--port', '0']);
}

/**
 * The baseline: a bare uWS server that decodes each frame inline (bare-listen.mjs); with `forward`, it also sends each
 * session's PCM to that provider_a URL with that key.
 * @param {string} codec
 * @param {number} sampleRate
 * @param {{ url: string, key: string }} [forward]
 */
export async function startBare(codec, sampleRate, forward) {
  const args = [path.join(BENCH_DIR, 'listen/bare-listen.mjs'), '--port', '0', '--codec', codec, '--sample-rate', String(sampleRate)];
  if (forward) args.push('--forward', forward.url, '--key', forward.key);
  return startPortChild('bare listen server', args);
}

/**
 * Reads GET /stats of the provider fake or the bare server (same shape). `window()` answers the lag since its previous
 * call: POST /stats/reset returns the figures it resets, so no chunk falls between two windows; when a reset also zeroes
 * the totals (bytes, chunks), they are carried here so `get()` stays cumulative.
 */
export class ProviderStats {
  #carriedBytes = 0;
  #carriedChunks = 0;
  /** Whether a reset zeroes the totals too; found out at the first reset that saw any bytes. */
  /** @type {boolean | undefined} */
  #resetZeroes;
  /** Totals before zero() (a probe session's audio), subtracted from every answer. */
  #base = { bytes: 0, chunks: 0 };
  /** @param {string} url */
  constructor(url) {
    this.url = url;
  }

  /** @returns {Promise<any>} */
  async #raw() {
    return (await fetch(`${this.url}/stats`, { signal: AbortSignal.timeout(STATS_TIMEOUT_MS) })).json();
  }

  /** @returns {Promise<{ streamsOpened: number, streamsOpen: number, bytes: number, chunks: number, lagMs: { count: number, p50: number | null, p95: number | null, p99: number | null, max: number | null } }>} */
  async get() {
    const s = await this.#raw();
    return { ...s, bytes: s.bytes + this.#carriedBytes - this.#base.bytes, chunks: s.chunks + this.#carriedChunks - this.#base.chunks };
  }

  /** From now on the totals count from zero. */
  async zero() {
    const s = await this.get();
    this.#base = { bytes: this.#base.bytes + s.bytes, chunks: this.#base.chunks + s.chunks };
  }

  /** Lag percentiles since the previous window, and the cumulative totals at that instant. */
  async window() {
    const res = await fetch(`${this.url}/stats/reset`, { method: 'POST', signal: AbortSignal.timeout(STATS_TIMEOUT_MS) });
    const text = await res.text();
    /** @type {any} */
    let s;
    try {
      s = JSON.parse(text);
    } catch {
      s = undefined;
    }
    if (!s || typeof s.bytes !== 'number') throw new Error(`POST ${this.url}/stats/reset did not answer the stats it reset (${res.status} ${text.slice(0, 100)})`);
    if (this.#resetZeroes === undefined && s.bytes > 0) this.#resetZeroes = (await this.#raw()).bytes < s.bytes;
    if (this.#resetZeroes) {
      this.#carriedBytes += s.bytes;
      this.#carriedChunks += s.chunks;
      return { ...s, bytes: this.#carriedBytes - this.#base.bytes, chunks: this.#carriedChunks - this.#base.chunks };
    }
    return { ...s, bytes: s.bytes - this.#base.bytes, chunks: s.chunks - this.#base.chunks };
  }
}

/**
 * One scrape of `url`/metrics; answers a reader of one series by its name and labels as printed, e.g.
 * `process_malloc_bytes{state="free"}` (NaN when absent).
 * @param {string} url
 */
async function metrics(url) {
  const text = await (await fetch(`${url}/metrics`)).text();
  const read = (/** @type {string} */ series) => Number(new RegExp(`^${series.replace(/[{}"]/g, '\\$&')} (\\S+)`, 'm').exec(text)?.[1] ?? NaN);
  /** The sum over every series of a metric whose labels include `label` (e.g. every shard's committed heap). */
  read.sum = (/** @type {string} */ name, /** @type {string} */ label) =>
    [...text.matchAll(new RegExp(`^${name}\\{([^}]*)\\} (\\S+)`, 'gm'))].filter((m) => m[1]?.includes(label)).reduce((a, m) => a + Number(m[2]), 0);
  /** A histogram's cumulative buckets summed over its other labels (a shard, ...), [upper bound, count][] with +Inf last (empty when absent). */
  read.buckets = (/** @type {string} */ name) => {
    /** @type {Map<number, number>} */
    const sums = new Map();
    for (const m of text.matchAll(new RegExp(`^${name}_bucket\\{(?:[^}]*,)?le="([^"]+)"[^}]*\\} (\\S+)`, 'gm'))) {
      const le = m[1] === '+Inf' ? Infinity : Number(m[1]);
      sums.set(le, (sums.get(le) ?? 0) + Number(m[2]));
    }
    return [...sums].sort((a, b) => a[0] - b[0]);
  };
  return read;
}

/**
 * The real service (dist/engine/index.js) in its own process, sqlite in a temp DATA_DIR, Redis under a unique prefix.
 * @param {{ env?: Record<string, string>, nodeArgs?: string[], entry?: string }} o `entry`: default dist/engine/index.js
 */
export async function startService(o = {}) {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'bench-listen-'));
  const env = await serviceEnv(dataDir, { MAX_SESSIONS: '100000', ...o.env });
  const child = await startChild({ name: 'service', args: [...SERVICE_NODE_ARGS, ...extraNodeArgs(), ...(o.nodeArgs ?? []), o.entry ?? SERVICE_ENTRY], env, port: Number(env.PORT), probePath: '/health' });
  /** `listen_sessions` from /metrics: the sessions the service holds. */
  const liveSessions = async () => (await metrics(child.url))('listen_sessions');
  return {
    child,
    env,
    port: Number(env.PORT),
    pid: /** @type {number} */ (child.proc.pid),
    liveSessions,
    /**
     * Where the RSS is, from /metrics, in bytes: the main thread's V8 heap (used, committed) and external memory, and
     * malloc's own accounting over every thread (in use, including mmapped chunks; free but kept in its arenas), and
     * the codec threads' V8 heaps, used and committed, summed over the shards (in neither of the others).
     */
    async memory() {
      const read = await metrics(child.url);
      return {
        heapUsed: read('nodejs_heap_size_used_bytes'),
        heapTotal: read('nodejs_heap_size_total_bytes'),
        external: read('nodejs_external_memory_bytes'),
        mallocInUse: read('process_malloc_bytes{state="in_use"}') + read('process_malloc_bytes{state="mmapped"}'),
        mallocFree: read('process_malloc_bytes{state="free"}'),
        codecHeapUsed: read.sum('codec_thread_heap_bytes', 'state="used"'),
        codecHeapTotal: read.sum('codec_thread_heap_bytes', 'state="committed"'),
      };
    },
    /**
     * The engine's own view of its delay, from /metrics: the decode-delay histogram's cumulative buckets
     * (listen_decode_delay_seconds, seconds) and the main thread's event-loop delay p99 since the previous scrape
     * (prom-client resets it on each), in seconds; and the audio kept for later transcription after provider failures
     * so far (stt_kept_audio_seconds_total over every provider), in seconds; the sessions it holds; and the main
     * thread's garbage collection so far (nodejs_gc_duration_seconds over every kind), in seconds.
     */
    async engineMetrics() {
      const read = await metrics(child.url);
      return { decodeBuckets: read.buckets('listen_decode_delay_seconds'), loopP99S: read('nodejs_eventloop_lag_p99_seconds'), keptS: read.sum('stt_kept_audio_seconds_total', 'provider='), liveSessions: read('listen_sessions'), gcS: read.sum('nodejs_gc_duration_seconds_sum', 'kind=') };
    },
    /**
     * Ends each user's in-progress conversation as the companion app does when recording stops
     * (`POST /v1/conversations` with `{}`; 404 when there is none), `concurrency` requests at a time, once the
     * service holds no session; then waits until its processing queue has nothing waiting or running
     * (`jobs_queued`). Answers the conversations ended and the ms it took, or null when the service has no
     * `jobs_queued` (an older build): processing then runs when each conversation's idle check comes due.
     * @param {string[]} tokens ID tokens of the users whose conversations end
     * @param {{ timeoutMs?: number, concurrency?: number }} [o]
     */
    async endConversations(tokens, o = {}) {
      const t0 = performance.now();
      const deadline = t0 + (o.timeoutMs ?? 120_000);
      const poll = async (/** @type {() => Promise<boolean>} */ done) => {
        while (!(await done())) {
          if (performance.now() > deadline) return false;
          await new Promise((r) => setTimeout(r, 250));
        }
        return true;
      };
      const busy = async () => {
        const read = await metrics(child.url);
        return read('jobs_queued{queue="processing",state="waiting"}') + read('jobs_queued{queue="processing",state="active"}');
      };
      if (Number.isNaN(await busy())) return null;
      await poll(async () => (await liveSessions()) === 0);
      let next = 0;
      let ended = 0;
      const worker = async () => {
        while (next < tokens.length) {
          const token = tokens[next++];
          const res = await fetch(`${child.url}/v1/conversations`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: '{}' });
          await res.arrayBuffer();
          if (res.status === 200) ended++;
        }
      };
      await Promise.all(Array.from({ length: o.concurrency ?? 16 }, worker));
      const idle = await poll(async () => (await busy()) === 0);
      return { ended, ms: Math.round(performance.now() - t0), idle };
    },
    /** SIGTERM (graceful drain), then cleans DATA_DIR and the Redis prefix; resolves to the exit code. */
    async stop() {
      const code = await child.stop();
      rmSync(dataDir, { recursive: true, force: true });
      await cleanRedis(env.REDIS_PREFIX);
      return code;
    },
  };
}

/**
 * ID tokens from the service's local issuer for `uids`, signed in this process (dist/scripts/token.js signs one per run).
 * @param {Record<string, string>} env the service's env (DATA_DIR holds the issuer's key)
 * @param {string[]} uids
 * @param {number} ttlS
 */
export async function signTokens(env, uids, ttlS) {
  const saved = { ...process.env };
  Object.assign(process.env, env);
  const { loadConfig } = await import(path.join(ROOT_DIR, 'dist/engine/config.js'));
  const config = loadConfig();
  process.env = saved;
  const { systemClock } = await import(path.join(ROOT_DIR, 'dist/engine/clock.js'));
  const { LocalIssuer } = await import(path.join(ROOT_DIR, 'dist/engine/identity/id-tokens.js'));
  const issuer = await LocalIssuer.open(config.dataDir, { issuer: config.idTokenIssuer, audience: config.idTokenAudience, clockToleranceS: config.idTokenClockToleranceS, clock: systemClock });
  return Promise.all(uids.map((u) => /** @type {Promise<string>} */ (issuer.sign(u, ttlS))));
}

/**
 * Whether the service streams a session's audio to the provider fake: one session, 1 s of audio, then the fake's
 * streamsOpened. False means the service does not use that provider (not wired yet, or STT_PROVIDERS ignored).
 * @param {{ port: number }} service
 * @param {ProviderStats} fake
 * @param {{ uid: string, token: string, query: string, frames: Buffer[] }} o
 */
export async function streamsToProvider(service, fake, o) {
  const { default: WebSocket } = await import('ws');
  const before = (await fake.get()).streamsOpened;
  const ws = new WebSocket(`ws://127.0.0.1:${service.port}/v4/listen?uid=${o.uid}&${o.query}`, { headers: { authorization: `Bearer ${o.token}` } });
  try {
    await new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('probe session: no ready within 20 s')), 20_000);
      ws.on('message', (d) => String(d).includes('"status":"ready"') && (clearTimeout(timer), resolve(undefined)));
      ws.on('close', (code, reason) => reject(new Error(`probe session closed: ${code} ${reason}`)));
      ws.on('error', reject);
    });
    for (const f of o.frames.slice(0, 50)) ws.send(f);
    for (const deadline = Date.now() + 3000; Date.now() < deadline; ) {
      if ((await fake.get()).streamsOpened > before) return true;
      await new Promise((r) => setTimeout(r, 100));
    }
    return false;
  } finally {
    ws.removeAllListeners('close');
    ws.close(1000);
    // The probe's audio is not the fleet's: wait for its stream to end, then count from zero.
    for (const deadline = Date.now() + 10_000; Date.now() < deadline && (await fake.get()).streamsOpen > 0; ) await new Promise((r) => setTimeout(r, 100));
    await fake.zero();
  }
}

/**
 * Gives each of `uids` a speech profile in the service's store (written from this process through the service's own
 * repository, so the bench needs no upload route): one espeak-ng voice, about 6 s, the same for every user.
 * @param {Record<string, string>} env the service's env (its store)
 * @param {string[]} uids
 */
export async function giveSpeechProfiles(env, uids) {
  const saved = { ...process.env };
  Object.assign(process.env, env);
  const { loadConfig } = await import(path.join(ROOT_DIR, 'dist/engine/config.js'));
  const config = loadConfig();
  process.env = saved;
  const { openStore, storeOptions } = await import(path.join(ROOT_DIR, 'dist/engine/db/store.js'));
  const { Voiceprints } = await import(path.join(ROOT_DIR, 'dist/engine/db/voiceprints.js'));
  const { createInlineEmbeddingService } = await import(path.join(ROOT_DIR, 'dist/engine/speakers/embedding-service.js'));
  const { speak } = await import(path.join(ROOT_DIR, 'dist/test/helpers/speech.js'));
  const dir = mkdtempSync(path.join(tmpdir(), 'bench-profile-'));
  const pcm = speak(dir, 'I would like to schedule a meeting for tomorrow afternoon at three. Please remember to buy some bread.', 'profile');
  rmSync(dir, { recursive: true, force: true });
  const store = openStore(storeOptions(config));
  const embeddings = createInlineEmbeddingService();
  try {
    const voiceprints = new Voiceprints(store.knex, embeddings);
    for (const uid of uids) await voiceprints.setProfile(uid, pcm, pcm.length / 16000);
  } finally {
    await embeddings.close();
    await store.close();
  }
}
