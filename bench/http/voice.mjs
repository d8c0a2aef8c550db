// Voice messages through the service: 10 s of espeak-ng speech as a WAV upload to POST /v2/voice-message/transcribe,
// decoded, gated by Silero VAD and sent to the provider_a fake's pre-recorded API; requests per second and ms each.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ROOT_DIR, figuresOf, finish, machine } from '../lib/report.mjs';
import { cleanRedis, serviceEnv, startChild } from '../lib/processes.mjs';
import { signTokens, startFakeProvider } from '../listen/stack.mjs';

export const USAGE = `npm run bench -- voice [--seconds 20] [--concurrency 2] [--long 3] [--smoke]
  --seconds      measured duration, in seconds (default 20)
  --concurrency  requests in flight at once (default 2, one per core of the bench machine)
  --long         then this many 900 s Opus messages one at a time, each with the main thread's longest
                 event-loop delay while it was taken (default 3; 0 skips them)
  --smoke        3 s, no long messages
  --out          result file (default bench/results/<timestamp>-voice.json)`;

/** Seconds of audio per message. */
const MESSAGE_S = 10;
/** Seconds of audio in a long message: the longest an upload may be (MAX_AUDIO_S). */
const LONG_S = 900;
/** Users the requests rotate through: each may send 20 a minute (VOICE_PER_MINUTE). */
const USERS = 400;

/** 10 s of speech as a 16 kHz mono WAV file's bytes: espeak-ng, padded or cut by sox. @param {string} dir */
function message(dir) {
  const spoken = path.join(dir, 'spoken.wav');
  const wav = path.join(dir, 'message.wav');
  execFileSync('espeak-ng', ['-s', '150', '-w', spoken, 'Remind me to call the dentist on Monday morning, then pick up the dry cleaning and buy milk, eggs and bread on the way home.']);
  execFileSync('sox', ['-V1', spoken, '-r', '16000', '-c', '1', '-b', '16', wav, 'pad', '0', String(MESSAGE_S), 'trim', '0', String(MESSAGE_S)]);
  return readFileSync(wav);
}

/** `seconds` of a noisy tone as a device's `.bin` file: length-prefixed 20 ms Opus packets at 16 kHz. @param {number} seconds */
async function opusBin(seconds) {
  const { OpusEncoderStream } = await import(path.join(ROOT_DIR, 'dist/native/opus.js'));
  const enc = new OpusEncoderStream(16000);
  const frame = new Int16Array(320);
  const parts = [];
  for (let i = 0; i < seconds * 50; i++) {
    for (let j = 0; j < 320; j++) frame[j] = Math.round(3000 * Math.sin((i * 320 + j) * 0.07) + (Math.random() - 0.5) * 2000);
    const packet = enc.encode(frame);
    const len = Buffer.alloc(4);
    len.writeUInt32LE(packet.length);
    parts.push(len, Buffer.from(packet));
  }
  return Buffer.concat(parts);
}

/** @param {Record<string, string | true>} options */
export async function run(options) {
  const smoke = options.smoke === true;
  const seconds = Number(options.seconds ?? (smoke ? 3 : 20));
  const concurrency = Number(options.concurrency ?? 2);
  const longCount = smoke ? 0 : Number(options.long ?? 3);
  /** @type {{ ms: number, lagMs: number }[]} */
  const longs = [];
  const m = machine();
  const dataDir = mkdtempSync(path.join(tmpdir(), 'bench-voice-'));
  const key = 'bench-voice-key';
  const fake = await startFakeProvider(key);
  const env = await serviceEnv(dataDir, { STT_PROVIDERS: 'provider_a', PROVIDER_A_API_KEY: key, PROVIDER_A_URL: `ws://127.0.0.1:${fake.port}/v1/listen` });
  /** @type {Awaited<ReturnType<typeof startChild>> | undefined} */
  let service;
  let serviceExit = /** @type {number | null} */ (null);
  /** @type {number[]} */
  const latencies = [];
  let failed = 0;
  let elapsedMs = 0;
  try {
    service = await startChild({ name: 'service', args: ['dist/engine/index.js'], env, port: Number(env.PORT), probePath: '/health' });
    const wav = message(dataDir);
    const tokens = await signTokens(env, Array.from({ length: USERS }, (_, i) => `bench-voice-${i}`), 3600);
    let next = 0;
    const send = async () => {
      const form = new FormData();
      form.append('files', new Blob([wav]), 'message.wav');
      form.append('language', 'en');
      const started = performance.now();
      const res = await fetch(`${service?.url}/v2/voice-message/transcribe`, { method: 'POST', body: form, headers: { authorization: `Bearer ${tokens[next++ % USERS]}` } });
      const body = /** @type {{ outcome?: string }} */ (await res.json());
      if (res.status !== 200 || body.outcome !== 'success') failed++;
      return performance.now() - started;
    };
    // Warm-up: the speech gate's thread and model load with the first message.
    await send();
    const start = performance.now();
    const until = start + seconds * 1000;
    await Promise.all(Array.from({ length: concurrency }, async () => {
      while (performance.now() < until) latencies.push(await send());
    }));
    elapsedMs = performance.now() - start;
    if (longCount > 0) {
      // The service's /metrics reports the event loop's longest delay since the last scrape.
      const lagMs = async () => 1000 * Number(/^nodejs_eventloop_lag_max_seconds (\S+)/m.exec(await (await fetch(`${service?.url}/metrics`)).text())?.[1]);
      const long = await opusBin(LONG_S);
      for (let i = 0; i < longCount; i++) {
        await lagMs();
        const form = new FormData();
        form.append('files', new Blob([long]), `long_${Math.floor(Date.now() / 1000) - 60}_fs320.bin`);
        const started = performance.now();
        const res = await fetch(`${service?.url}/v2/voice-message/transcribe`, { method: 'POST', body: form, headers: { authorization: `Bearer ${tokens[next++ % USERS]}` } });
        await res.arrayBuffer();
        if (res.status !== 200) failed++;
        longs.push({ ms: performance.now() - started, lagMs: await lagMs() });
      }
    }
  } finally {
    if (service) serviceExit = await service.stop();
    await fake.stop();
    await cleanRedis(env.REDIS_PREFIX);
    rmSync(dataDir, { recursive: true, force: true });
  }
  latencies.sort((a, b) => a - b);
  const q = (/** @type {number} */ p) => Math.round(latencies[Math.min(latencies.length - 1, Math.floor(p * latencies.length))] ?? 0);
  const perSec = Number(((latencies.length * 1000) / elapsedMs).toFixed(1));
  const meanMs = Math.round(latencies.reduce((a, b) => a + b, 0) / Math.max(1, latencies.length));
  const result = {
    scenario: 'voice',
    version: 1,
    startedAt: new Date().toISOString(),
    machine: m,
    options: { seconds, concurrency, smoke, messageS: MESSAGE_S, long: longCount, longS: LONG_S },
    baseline: `none: ${MESSAGE_S} s messages (espeak-ng speech, 16 kHz WAV, 320 KB) to the provider_a fake, which answers at once; ${concurrency} in flight`,
    summary: {
      head: ['target', 'req/s', 'mean ms', 'p50 ms', 'p99 ms', 'failed', 'what'],
      rows: [['POST /v2/voice-message/transcribe', String(perSec), String(meanMs), String(q(0.5)), String(q(0.99)), String(failed), 'multipart read, WAV decode and Silero gate (file decoder thread), provider_a pre-recorded request']],
    },
    tables: longs.length === 0 ? [] : [{
      title: `${LONG_S} s Opus messages (${LONG_S * 50} packets), one at a time`,
      head: ['message', 'ms', "main thread's longest event-loop delay, ms"],
      rows: longs.map((l, i) => [String(i + 1), String(Math.round(l.ms)), l.lagMs.toFixed(1)]),
    }],
    figures: figuresOf({
      'voice req/s': [perSec, 'req/s', 'higher'],
      'voice mean ms': [meanMs, 'ms', 'lower'],
      'voice p99 ms': [q(0.99), 'ms', 'lower'],
      ...(longs.length > 0 ? { 'long message loop delay max ms': [Math.max(...longs.map((l) => l.lagMs)), 'ms', 'lower'] } : {}),
    }),
    goals: [],
    notes: [`${latencies.length} messages in ${(elapsedMs / 1000).toFixed(1)} s`],
    serviceExitCode: serviceExit,
  };
  finish(/** @type {any} */ (result), options);
  if (failed > 0 || latencies.length === 0) throw new Error(`${failed} of ${latencies.length} messages failed: the figures are not valid`);
  if (serviceExit !== 0) throw new Error(`the service exited with ${serviceExit} on SIGTERM`);
  return result;
}
