// Macro bench of live sessions: the real service in its own process; its RSS idle, with N idle /v4/listen sessions, and with the N
// streaming opus_fs320 at real-time pace; its CPU seconds per session-second of audio. Sessions use custom_stt=enabled, so no
// recogniser is loaded: the figures are the session, transport and codec layers (decode to 16 kHz PCM), not an STT engine.
import { randomUUID } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import WebSocket from 'ws';
import { ROOT_DIR, machine, machineLine, noiseLine, table, writeResult } from '../lib/report.mjs';
import { freePort, startChild } from '../lib/processes.mjs';

export const USAGE = `npm run bench -- sessions [--sessions 100] [--seconds 10] [--settle 2] [--smoke]
  --sessions     live sessions to open (default 100)
  --seconds      streaming duration, in seconds (default 10)
  --settle       pause before each RSS reading, in seconds (default 2)
  --smoke        5 sessions, 2 s of streaming, 1 s settle
  --out          result file (default bench/results/<timestamp>-sessions.json)
sessions are opened with custom_stt=enabled: no STT engine runs; the server decodes every packet to 16 kHz PCM`;

const FRAME_MS = 20; // opus_fs320: 320 samples at 16 kHz per packet
const PHRASE = 'Wearables stream audio to the server, one frame at a time, all day long.';

/** Clock ticks per second for /proc/<pid>/stat. */
const CLK_TCK = (() => {
  try {
    return Number(execFileSync('getconf', ['CLK_TCK']).toString().trim()) || 100;
  } catch {
    return 100;
  }
})();

/** @param {number} pid resident set size in bytes, from /proc/<pid>/status. */
function rssBytes(pid) {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) * 1024 : NaN;
}

/** @param {number} pid user + system CPU seconds of the whole process (all threads), from /proc/<pid>/stat. */
function cpuSeconds(pid) {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' '); // fields from 3 (state) on
  return (Number(fields[11]) + Number(fields[12])) / CLK_TCK; // utime (14), stime (15)
}

const sleep = (/** @type {number} */ ms) => new Promise((r) => setTimeout(r, ms));
const mib = (/** @type {number} */ b) => Math.round((b / 2 ** 20) * 10) / 10;
const kib = (/** @type {number} */ b) => Math.round(b / 1024);

/**
 * One pre-encoded set of 20 ms opus packets (espeak-ng speech when installed, else a tone), reused by every session.
 * @param {string} dir
 */
async function packetSet(dir) {
  const { OpusEncoderStream } = await import(path.join(ROOT_DIR, 'dist/native/opus.js'));
  /** @type {Int16Array} */
  let pcm;
  let what;
  try {
    const wav = path.join(dir, 'speech.wav');
    const raw = path.join(dir, 'speech.raw');
    execFileSync('espeak-ng', ['-w', wav, PHRASE], { stdio: 'ignore' });
    execFileSync('sox', [wav, '-r', '16000', '-c', '1', '-b', '16', '-e', 'signed-integer', '-t', 'raw', raw], { stdio: 'ignore' });
    const b = readFileSync(raw);
    pcm = new Int16Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength));
    what = 'espeak-ng speech';
  } catch {
    pcm = Int16Array.from({ length: 16000 * 3 }, (_, i) => Math.round(8000 * Math.sin((2 * Math.PI * 440 * i) / 16000)));
    what = '440 Hz tone';
  }
  const enc = new OpusEncoderStream(16000);
  /** @type {Uint8Array[]} */
  const packets = [];
  for (let i = 0; i + 320 <= pcm.length; i += 320) packets.push(enc.encode(pcm.slice(i, i + 320)));
  return { packets, what, seconds: (packets.length * FRAME_MS) / 1000 };
}

/**
 * Opens one session and resolves when the server said ready.
 * @param {string} url
 * @param {string} token
 * @returns {Promise<{ ws: WebSocket, closed: { code: number, reason: string } | undefined }>}
 */
function openSession(url, token) {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { headers: { authorization: `Bearer ${token}` } });
    const s = { ws, closed: /** @type {{ code: number, reason: string } | undefined} */ (undefined) };
    const timer = setTimeout(() => reject(new Error('no ready within 30 s')), 30_000);
    ws.on('message', (data, isBinary) => {
      if (isBinary) return;
      const text = String(data);
      if (text.includes('"status":"ready"')) {
        clearTimeout(timer);
        resolve(s);
      }
    });
    ws.on('close', (code, reason) => {
      s.closed = { code, reason: reason.toString() };
      clearTimeout(timer);
      reject(new Error(`closed before ready: ${code} ${reason}`));
    });
    ws.on('unexpected-response', (_req, res) => reject(new Error(`upgrade refused: ${res.statusCode}`)));
    ws.on('error', reject);
  });
}

/**
 * @param {Record<string, string | true>} options
 */
export async function run(options) {
  const smoke = options.smoke === true;
  const sessions = Number(options.sessions ?? (smoke ? 5 : 100));
  const seconds = Number(options.seconds ?? (smoke ? 2 : 10));
  const settle = Number(options.settle ?? (smoke ? 1 : 2));
  for (const [k, v] of Object.entries({ sessions, seconds })) if (!Number.isInteger(v) || v <= 0) throw new Error(`--${k} must be a positive integer`);
  if (!Number.isFinite(settle) || settle < 0) throw new Error('--settle must be a number ≥ 0');
  const m = machine();

  const dataDir = mkdtempSync(path.join(tmpdir(), 'bench-sessions-'));
  const env = {
    HOST: '127.0.0.1',
    PORT: String(await freePort()),
    DATA_DIR: dataDir,
    REDIS_URL: 'redis://127.0.0.1:6379',
    REDIS_PREFIX: `bench-${randomUUID()}`,
    REDIS_EMBEDDED: 'never',
    LOG_LEVEL: 'warn',
    MAX_SESSIONS: String(Math.max(1000, sessions)),
  };
  const set = await packetSet(dataDir);
  /** @type {Awaited<ReturnType<typeof startChild>> | undefined} */
  let service;
  /** @type {{ ws: WebSocket, closed: { code: number, reason: string } | undefined }[]} */
  const open = [];
  let serviceExit = /** @type {number | null} */ (null);
  /** @type {Record<string, any>} */
  const figures = {};
  try {
    service = await startChild({ name: 'service', args: ['dist/engine/index.js'], env, port: Number(env.PORT), probePath: '/health' });
    const pid = /** @type {number} */ (service.proc.pid);

    // ID tokens for N users from the service's local issuer, in this process (dist/scripts/token.js signs one per run).
    const saved = { ...process.env };
    Object.assign(process.env, env);
    const { loadConfig } = await import(path.join(ROOT_DIR, 'dist/engine/config.js'));
    const { systemClock } = await import(path.join(ROOT_DIR, 'dist/engine/clock.js'));
    const { LocalIssuer } = await import(path.join(ROOT_DIR, 'dist/engine/identity/id-tokens.js'));
    const config = loadConfig();
    process.env = saved;
    const issuer = await LocalIssuer.open(config.dataDir, { issuer: config.idTokenIssuer, audience: config.idTokenAudience, clockToleranceS: config.idTokenClockToleranceS, clock: systemClock });
    const uids = Array.from({ length: sessions }, (_, i) => `bench-user-${i}`);
    const tokens = await Promise.all(uids.map((u) => issuer.sign(u, 3600)));

    await sleep(settle * 1000);
    const idleRss = rssBytes(pid);
    const idleCpu0 = cpuSeconds(pid);

    // N idle sessions: connected, ready, no audio. Opened 10 at a time.
    const openStart = performance.now();
    for (let i = 0; i < sessions; i += 10) {
      const batch = await Promise.all(
        uids.slice(i, i + 10).map((uid, k) => openSession(`ws://127.0.0.1:${env.PORT}/v4/listen?uid=${uid}&codec=opus_fs320&sample_rate=16000&custom_stt=enabled`, /** @type {string} */ (tokens[i + k]))),
      );
      for (const s of batch) {
        s.ws.removeAllListeners('close');
        s.ws.on('close', (code, reason) => (s.closed = { code, reason: reason.toString() }));
        open.push(s);
      }
    }
    const openMs = performance.now() - openStart;
    await sleep(settle * 1000);
    const idleSessionsRss = rssBytes(pid);
    // CPU of the idle sessions over a quiet window of the settle time (timers, pings).
    const quiet0 = cpuSeconds(pid);
    await sleep(Math.max(1, settle) * 1000);
    const idleSessionsCpuPerS = (cpuSeconds(pid) - quiet0) / Math.max(1, settle);

    // The N stream at real-time pace: every 20 ms one packet per session, the shared set cycled with an offset per session.
    process.stderr.write(`sessions: ${sessions} ready in ${Math.round(openMs)} ms; streaming ${seconds} s\n`);
    const packets = set.packets;
    const total = Math.round((seconds * 1000) / FRAME_MS);
    let peakRss = idleSessionsRss;
    let sent = 0;
    let late = 0;
    const clientCpu0 = process.cpuUsage();
    const cpu0 = cpuSeconds(pid);
    const t0 = performance.now();
    for (let k = 0; k < total; k++) {
      const wait = t0 + k * FRAME_MS - performance.now();
      if (wait > 0) await sleep(wait);
      else if (wait < -FRAME_MS) late++;
      open.forEach((s, i) => {
        if (s.closed) return;
        s.ws.send(packets[(k + i * 7) % packets.length]);
        sent++;
      });
      if (k % 25 === 0) peakRss = Math.max(peakRss, rssBytes(pid));
    }
    const streamWallS = (performance.now() - t0) / 1000;
    // Let the last packets be decoded, then read CPU and RSS while the sessions are still open.
    await sleep(500);
    const streamCpu = cpuSeconds(pid) - cpu0;
    const streamingRss = rssBytes(pid);
    peakRss = Math.max(peakRss, streamingRss);
    const client = process.cpuUsage(clientCpu0);
    const closedEarly = open.filter((s) => s.closed);
    const sessionSeconds = sessions * seconds;

    figures.idle = { rssMiB: mib(idleRss), cpuSecondsAtStart: Math.round(idleCpu0 * 100) / 100 };
    figures.idleSessions = {
      sessions,
      openMs: Math.round(openMs),
      rssMiB: mib(idleSessionsRss),
      rssPerSessionKiB: kib((idleSessionsRss - idleRss) / sessions),
      cpuSecondsPerSecond: Math.round(idleSessionsCpuPerS * 1000) / 1000,
    };
    figures.streaming = {
      sessions,
      seconds,
      wallSeconds: Math.round(streamWallS * 100) / 100,
      packetsSent: sent,
      lateTicks: late,
      rssMiB: mib(streamingRss),
      peakRssMiB: mib(peakRss),
      rssPerSessionKiB: kib((streamingRss - idleRss) / sessions),
      rssPerSessionOverIdleSessionKiB: kib((streamingRss - idleSessionsRss) / sessions),
      serverCpuSeconds: Math.round(streamCpu * 100) / 100,
      serverCpuSecondsPerSessionSecond: Math.round((streamCpu / sessionSeconds) * 1e5) / 1e5,
      serverCpuShareOfOneCore: Math.round((streamCpu / streamWallS) * 1000) / 1000,
      clientCpuSeconds: Math.round(((client.user + client.system) / 1e6) * 100) / 100,
      closedEarly: closedEarly.map((s) => s.closed),
    };
  } finally {
    for (const s of open) if (!s.closed) s.ws.close(1000);
    await sleep(200);
    if (service) serviceExit = await service.stop();
    rmSync(dataDir, { recursive: true, force: true });
  }

  const result = {
    scenario: 'sessions',
    version: 1,
    startedAt: new Date().toISOString(),
    machine: m,
    options: { sessions, seconds, settle, smoke },
    audio: { codec: 'opus_fs320', sampleRate: 16000, frameMs: FRAME_MS, packetSet: `${set.packets.length} packets (${set.seconds} s of ${set.what}), encoded once, shared` },
    stt: 'none: custom_stt=enabled, no recogniser loaded; the server decodes every packet to 16 kHz PCM',
    baseline: 'the idle service process (no sessions)',
    clkTck: CLK_TCK,
    ...figures,
    serviceExitCode: serviceExit,
  };
  const file = writeResult('sessions', result, options.out);
  const st = figures.streaming;
  const is = figures.idleSessions;
  console.log(machineLine(m));
  console.log(`baseline: the idle service process (${figures.idle.rssMiB} MiB RSS); ${sessions} sessions with custom_stt=enabled (no STT engine: session + transport + opus decode only), opus_fs320 at real-time pace for ${seconds} s`);
  console.log(
    table(
      ['phase', 'RSS MiB', 'KiB per session', 'server CPU', 'what'],
      [
        ['idle process', String(figures.idle.rssMiB), '-', '-', 'started, no sessions'],
        [`${sessions} idle sessions`, String(is.rssMiB), String(is.rssPerSessionKiB), `${is.cpuSecondsPerSecond} s/s`, `connected and ready, no audio (opened in ${is.openMs} ms)`],
        [`${sessions} streaming`, String(st.rssMiB), String(st.rssPerSessionKiB), `${st.serverCpuSecondsPerSessionSecond} s per session-s`, `RSS beyond the idle process; peak ${st.peakRssMiB} MiB; ${st.serverCpuShareOfOneCore} of one core`],
      ],
    ),
  );
  console.log(`bench client: ${st.clientCpuSeconds} CPU s for ${st.packetsSent} packets on the same machine; ${st.lateTicks} ticks more than 20 ms late`);
  console.log(noiseLine(m));
  console.log(`results: ${path.relative(process.cwd(), file)}`);
  if (st.closedEarly.length > 0) throw new Error(`${st.closedEarly.length} sessions closed while streaming (first: ${JSON.stringify(st.closedEarly[0])}): the figures are not valid`);
  if (serviceExit !== 0) throw new Error(`the service exited with ${serviceExit} on SIGTERM`);
  return result;
}
