// provider_a's own cost (write(pcm) to socket latency, heap per session) beside @deepgram/sdk v5 sockets, the alternative
// it is compared with; runs dist/ against the Deepgram fake in its own process, so this heap holds only the clients.
//   node bench/scripts/provider-a-latency.mjs [--sessions 50] [--seconds 10] [--heap-sessions 300] [--out file.json]
import { spawn } from 'node:child_process';
import net from 'node:net';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { ROOT_DIR, machine, machineLine, noiseLine, table, writeResult } from '../lib/report.mjs';

export const USAGE = `node bench/scripts/provider-a-latency.mjs [--sessions 50] [--seconds 10] [--heap-sessions 300]
  --sessions       concurrent sessions fed one frame per frame period during the latency runs (default 50)
  --seconds        length of each latency run (default 10)
  --heap-sessions  sessions opened to measure heap per session, for provider_a and for the SDK (default 300)
  --out            result file (default bench/results/<timestamp>-provider-a.json)`;

setFlagsFromString('--expose-gc');
const gc = /** @type {() => void} */ (runInNewContext('gc'));
const dist = (/** @type {string} */ p) => pathToFileURL(path.join(ROOT_DIR, 'dist', p)).href;
const KEY = 'bench-key';
const SDK_OPTIONS = { model: 'nova-3', language: 'en', encoding: 'linear16', sample_rate: 16000, channels: 1, diarize: 'true', punctuate: 'true', smart_format: 'true', endpointing: 300, interim_results: 'false' };

/** The fake as its standalone process (as the load bench runs it), so this process's heap holds only the clients. */
async function startFakeProcess() {
  const child = spawn(process.execPath, [path.join(ROOT_DIR, 'dist/test/fakes/deepgram-server.js'), '--port', '0', '--key', KEY], { stdio: ['ignore', 'pipe', 'inherit'] });
  const port = await new Promise((resolve, reject) => {
    child.stdout.once('data', (/** @type {Buffer} */ b) => resolve(JSON.parse(b.toString()).port));
    child.once('exit', (code) => reject(new Error(`fake exited with ${code}`)));
  });
  const base = `http://127.0.0.1:${port}`;
  return {
    port,
    stats: async () => /** @type {any} */ (await (await fetch(`${base}/stats`)).json()),
    reset: async () => void (await fetch(`${base}/stats/reset`, { method: 'POST' })),
    stop: () => void child.kill('SIGTERM'),
  };
}

/** @param {number[]} xs @param {number} q */
const pct = (xs, q) => xs[Math.min(xs.length - 1, Math.ceil(q * xs.length) - 1)] ?? 0;
const us = (/** @type {number} */ ms) => Math.round(ms * 1000);
const sleep = (/** @type {number} */ ms) => new Promise((r) => setTimeout(r, ms));

/**
 * Hooks the sockets to the fake: did a write() reach one, and did bytes stay queued in userland?
 * @param {number} port
 */
function socketProbe(port) {
  const orig = net.Socket.prototype.write;
  const probe = { wrote: false, queued: 0, last: /** @type {net.Socket | null} */ (null) };
  net.Socket.prototype.write = /** @type {any} */ (
    function (/** @type {any[]} */ ...args) {
      if (this.remotePort === port) {
        probe.wrote = true;
        probe.last = this;
      }
      return orig.apply(this, /** @type {any} */ (args));
    }
  );
  return probe;
}

/**
 * Feeds `sessions` streams one `frameMs` frame each per period; latency = write(pcm) until its bytes went to the socket.
 * @param {any[]} streams @param {any} probe @param {number} frameMs @param {number} seconds
 */
async function latencyRun(streams, probe, frameMs, seconds) {
  const samples = (16000 * frameMs) / 1000;
  const waiting = streams.map(() => /** @type {number[]} */ ([]));
  /** @type {number[]} */
  const lat = [];
  let queued = 0;
  const end = performance.now() + seconds * 1000;
  // Paced by absolute time (a late tick sends what is due), so the sender does not drift behind real time.
  let due = performance.now();
  await new Promise((resolve) => {
    const step = () => {
      while (due <= performance.now()) {
        due += frameMs;
        for (let i = 0; i < streams.length; i++) {
          const frame = new Int16Array(samples).fill(100); // a fresh buffer, as a decoder hands over
          const tIn = performance.now();
          const w = /** @type {number[]} */ (waiting[i]);
          w.push(tIn);
          probe.wrote = false;
          streams[i].write(frame);
          if (!probe.wrote) continue;
          const tOut = performance.now();
          if ((probe.last?.writableLength ?? 0) > 0) queued++;
          for (const t of w) lat.push(tOut - t);
          w.length = 0;
        }
      }
      if (performance.now() > end) resolve(undefined);
      else setTimeout(step, Math.max(0, due - performance.now()));
    };
    step();
  });
  lat.sort((a, b) => a - b);
  return { frameMs, samples: lat.length, p50Us: us(pct(lat, 0.5)), p99Us: us(pct(lat, 0.99)), maxUs: us(lat.at(-1) ?? 0), leftQueuedInUserland: queued };
}

/**
 * Heap and RSS per session for `open()`ed streams, each having sent one 20 ms frame.
 * @param {number} n @param {() => Promise<any>} open @param {(h: any) => void} send
 */
async function heapPerSession(n, open, send) {
  gc();
  const before = process.memoryUsage();
  const handles = [];
  for (let i = 0; i < n; i += 50) handles.push(...(await Promise.all(Array.from({ length: Math.min(50, n - i) }, open))));
  for (const h of handles) send(h);
  await sleep(500);
  gc();
  const after = process.memoryUsage();
  const per = (/** @type {keyof NodeJS.MemoryUsage} */ k) => Math.round((after[k] - before[k]) / n);
  return { handles, perSession: { heapUsedBytes: per('heapUsed'), externalBytes: per('external'), rssBytes: per('rss') } };
}

/**
 * Main-thread time of one synchronous send of a fresh 20 ms frame, for each client, over `rounds` rounds that alternate
 * between them (so a busy machine weighs on both alike). Returns µs per message, in the order of `clients`.
 * @param {{ handles: any[], send: (h: any, f: Int16Array) => void }[]} clients
 */
async function sendCost(clients, rounds = 40) {
  const totals = /** @type {bigint[]} */ (clients.map(() => 0n));
  for (let r = 0; r < rounds; r++) {
    clients.forEach((c, k) => {
      const frames = c.handles.map(() => new Int16Array(320).fill(100));
      const t0 = process.hrtime.bigint();
      for (let j = 0; j < c.handles.length; j++) c.send(c.handles[j], /** @type {Int16Array} */ (frames[j]));
      totals[k] = /** @type {bigint} */ (totals[k]) + process.hrtime.bigint() - t0;
    });
    await sleep(20);
  }
  return totals.map((t, k) => Math.round((Number(t) / 1000 / (rounds * /** @type {any} */ (clients[k]).handles.length)) * 10) / 10);
}

/** @param {Record<string, string | true>} options */
export async function run(options) {
  const sessions = Number(options.sessions ?? 50);
  const seconds = Number(options.seconds ?? 10);
  const heapSessions = Number(options['heap-sessions'] ?? 300);
  const m = machine();
  const fake = await startFakeProcess();
  const url = `ws://127.0.0.1:${fake.port}/v1/listen`;
  const { ProviderAEngine } = await import(dist('engine/stt/provider-a/engine.js'));
  const { Scheduler } = await import(dist('engine/scheduler.js'));
  const { systemClock } = await import(dist('engine/clock.js'));
  const { createLogger } = await import(dist('engine/logger.js'));
  const { DeepgramClient, DeepgramEnvironment } = await import('@deepgram/sdk');
  const scheduler = new Scheduler({ clock: systemClock });
  const engine = new ProviderAEngine({ url, apiKey: KEY, clock: systemClock, scheduler, logger: createLogger('silent') });
  const opts = (/** @type {number} */ i) => ({ language: 'en', sampleRateHz: 16000, sessionId: `bench-${i}` });
  const probe = socketProbe(fake.port);
  const frame20 = new Int16Array(320).fill(100);

  const client = new DeepgramClient({ apiKey: KEY, environment: { ...DeepgramEnvironment.Production, production: `ws://127.0.0.1:${fake.port}` } });
  const sdkOpen = async () => {
    const s = await client.listen.v1.connect({ ...SDK_OPTIONS, reconnectAttempts: 0 });
    s.on('message', () => undefined);
    s.connect();
    await s.waitForOpen();
    return s;
  };
  let i = 0;
  // Warm-up: lazily loaded modules and first-use allocations are not per-session cost.
  for (const s of [await engine.open(opts(i++)), await engine.open(opts(i++))]) (s.write(frame20), await s.close());
  for (const s of [await sdkOpen(), await sdkOpen()]) (s.sendMedia(frame20), s.close());

  // 1. heap per session, then main-thread cost per 20 ms message with both sets open: provider_a and the SDK
  const ours = await heapPerSession(heapSessions, () => engine.open(opts(i++)), (s) => s.write(frame20));
  const sdk = await heapPerSession(heapSessions, sdkOpen, (s) => s.sendMedia(frame20));
  const [oursSendUs, sdkSendUs] = await sendCost([
    { handles: ours.handles, send: (s, f) => s.write(f) },
    { handles: sdk.handles, send: (s, f) => s.sendMedia(f) },
  ]);
  await Promise.all(ours.handles.map((s) => s.close()));
  for (const s of sdk.handles) s.close();

  // 2. latency with 20 ms and 10 ms frames
  const streams = await Promise.all(Array.from({ length: sessions }, () => engine.open(opts(i++))));
  await fake.reset();
  const lat20 = await latencyRun(streams, probe, 20, seconds);
  const fakeLag20 = (await fake.stats()).lagMs;
  const lat10 = await latencyRun(streams, probe, 10, seconds);
  // Memory while streaming: mostly the unacknowledged tail (audio since the last final result, ~2 s with the fake).
  gc();
  const streaming = process.memoryUsage();
  await Promise.all(streams.map((s) => s.close()));
  await sleep(200);
  gc();
  const closed = process.memoryUsage();
  const streamingPerSession = {
    heapUsedBytes: Math.round((streaming.heapUsed - closed.heapUsed) / sessions),
    arrayBuffersBytes: Math.round((streaming.arrayBuffers - closed.arrayBuffers) / sessions),
  };

  // 3. what the SDK does, with its defaults, when the provider drops a stream: does it reconnect on its own?
  const { startFakeDeepgram } = await import(dist('test/fakes/deepgram-server.js'));
  const local = await startFakeDeepgram({ apiKey: KEY });
  local.script({ kind: 'accept', dropAfterBytes: 640 });
  const dfltClient = new DeepgramClient({ apiKey: KEY, environment: { ...DeepgramEnvironment.Production, production: local.url.replace('/v1/listen', '') } });
  const dflt = await dfltClient.listen.v1.connect({ ...SDK_OPTIONS });
  let closes = 0;
  dflt.on('close', () => closes++);
  dflt.on('error', () => undefined);
  dflt.connect();
  await dflt.waitForOpen();
  dflt.sendMedia(frame20);
  const dropAt = performance.now();
  let reopenedAfterMs = null;
  while (performance.now() - dropAt < 8000 && reopenedAfterMs === null) {
    await sleep(20);
    if (local.streams.length >= 2) reopenedAfterMs = Math.round(performance.now() - dropAt);
  }
  dflt.close();
  await local.close();

  await engine.close();
  scheduler.close();
  fake.stop();
  const result = {
    scenario: 'provider-a',
    machine: m,
    latency: [lat20, lat10],
    fakeArrivalLagMs20: fakeLag20,
    heapPerSession: { providerA: ours.perSession, sdk: sdk.perSession },
    streamingPerSession,
    mainThreadUsPer20msMessage: { providerA: oursSendUs, sdk: sdkSendUs },
    sdkDefaultReconnect: { reconnectedAfterMs: reopenedAfterMs, closeEventsSeenByCaller: closes },
  };
  console.log(machineLine(m));
  console.log(`\nwrite(pcm) → bytes handed to the provider socket, ${sessions} sessions, ${seconds} s per run`);
  console.log(table(['frame', 'samples', 'p50 µs', 'p99 µs', 'max µs', 'left queued'], result.latency.map((r) => [`${r.frameMs} ms`, String(r.samples), String(r.p50Us), String(r.p99Us), String(r.maxUs), String(r.leftQueuedInUserland)])));
  console.log(`(10 ms frames wait for the next one: messages are at least 20 ms)\nfake-side arrival lag, 20 ms frames: p50 ${fakeLag20.p50} ms, p99 ${fakeLag20.p99} ms`);
  console.log(`\nper session (${heapSessions} open, one 20 ms frame sent each) and main-thread time per 20 ms message`);
  console.log(table(['client', 'heap B', 'external B', 'rss B', 'µs/msg'], [
    ['provider_a (ws)', String(ours.perSession.heapUsedBytes), String(ours.perSession.externalBytes), String(ours.perSession.rssBytes), String(oursSendUs)],
    ['@deepgram/sdk v5', String(sdk.perSession.heapUsedBytes), String(sdk.perSession.externalBytes), String(sdk.perSession.rssBytes), String(sdkSendUs)],
  ]));
  console.log(`provider_a while streaming (${sessions} sessions, after the runs): ${streamingPerSession.heapUsedBytes} B heap + ${streamingPerSession.arrayBuffersBytes} B audio buffers per session`);
  console.log(`\nSDK with default options after a mid-stream drop: ${reopenedAfterMs === null ? 'did not reconnect within 8 s' : `reconnected on its own after ${reopenedAfterMs} ms`} (caller saw ${closes} close event(s))`);
  console.log(noiseLine(m));
  console.log(`result: ${writeResult('provider-a', result, options.out)}`);
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const { parseArgs } = await import('../lib/report.mjs');
  const { options } = parseArgs(process.argv.slice(2));
  if (options.help) console.log(USAGE);
  else await run(options);
  process.exit(0);
}
