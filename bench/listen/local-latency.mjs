// How soon the `local` engine's words reach a device: N sessions stream espeak-ng speech in real time to the real
// service (default engine, VAD_GATE on), then stop sending. First-word latency is the time from the start of speech in
// the audio to the first transcript segment with words at the client; last-word latency the time from the end of the
// speech to the segment that brings its last words, while the socket is still open and no frame is sent.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import WebSocket from 'ws';
import { figuresOf, finish, machine } from '../lib/report.mjs';
import { signTokens, startService } from './stack.mjs';

export const USAGE = `usage: npm run bench -- local-latency [--sessions N] [--wait-s S] [--frame-ms MS] [--smoke] [--out FILE]
  --sessions N   sessions streaming at once, the i-th starting at random within i seconds (default 2)
  --wait-s S     how long each client keeps its socket open, sending nothing, after its audio (default 4)
  --frame-ms MS  audio per frame, pcm16 at 16 kHz (default 100)
  --smoke        one session, the first sentence only, 2 s of wait (checks that the bench runs)
the audio: 0.5 s of silence, then ~20 s of continuous espeak-ng speech (sentences with short pauses), then nothing.`;

const TEXT =
  'The weather is nice today and we are going for a walk in the park. ' +
  'After lunch we will meet our friends near the old bridge, and then we will take the train back home. ' +
  'Tomorrow morning I have a meeting with the design team about the new project. ' +
  'We need to decide on the budget, the schedule and who will write the first report.';
const RATE = 16000;
const LEAD_S = 0.5;

/**
 * espeak-ng speech as 16 kHz mono s16le, behind LEAD_S of silence.
 * @param {string} text
 */
function render(text) {
  const dir = mkdtempSync(path.join(tmpdir(), 'bench-local-'));
  try {
    execFileSync('espeak-ng', ['-s', '140', '-w', path.join(dir, 's.wav'), text]);
    execFileSync('sox', [path.join(dir, 's.wav'), '-r', String(RATE), '-c', '1', '-b', '16', '-e', 'signed', path.join(dir, 's.raw')]);
    const speech = readFileSync(path.join(dir, 's.raw'));
    return Buffer.concat([Buffer.alloc(Math.round(LEAD_S * RATE) * 2), speech]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** First and last sample louder than the noise: where the speech begins and ends, in seconds. */
function speechSpan(/** @type {Buffer} */ pcm) {
  const s = new Int16Array(pcm.buffer, pcm.byteOffset, pcm.length / 2);
  let first = -1;
  let last = -1;
  for (let i = 0; i < s.length; i++) {
    if (Math.abs(s[i] ?? 0) > 300) {
      if (first < 0) first = i;
      last = i;
    }
  }
  return { startS: first / RATE, endS: last / RATE, lengthS: s.length / RATE };
}

/** @param {number[]} xs @param {number} p */
function pct(xs, p) {
  if (xs.length === 0) return null;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)] ?? null;
}

/**
 * One session: connects, streams `pcm` paced by the wall clock, keeps the socket open `waitS` after the last frame.
 * @param {{ port: number, uid: string, token: string, pcm: Buffer, frameMs: number, span: ReturnType<typeof speechSpan>, waitS: number }} o
 */
async function session(o) {
  const ws = new WebSocket(`ws://127.0.0.1:${o.port}/v4/listen?uid=${o.uid}&codec=pcm16&sample_rate=16000&language=en`, { headers: { authorization: `Bearer ${o.token}` } });
  /** @type {{ at: number, words: number, endS: number }[]} */
  const arrivals = [];
  /** Words of each segment id, as last sent (a segment is sent again when it changes). */
  const words = new Map();
  let t0 = 0;
  const ready = new Promise((resolve, reject) => {
    ws.on('message', (d, binary) => {
      if (binary || String(d) === 'ping') return;
      const msg = JSON.parse(String(d));
      if (msg?.type === 'service_status' && msg.status === 'ready') resolve(undefined);
      if (Array.isArray(msg) && t0 > 0) {
        const count = (/** @type {any} */ s) => String(s.text ?? '').split(/\s+/).filter(Boolean).length;
        for (const s of msg) words.set(s.id, count(s));
        const n = msg.reduce((k, s) => k + count(s), 0);
        if (n > 0) arrivals.push({ at: performance.now(), words: n, endS: Math.max(...msg.map((s) => Number(s.end) || 0)) });
      }
    });
    ws.on('close', (code) => reject(new Error(`closed before ready: ${code}`)));
    ws.on('error', reject);
  });
  await ready;
  const bytes = (RATE * 2 * o.frameMs) / 1000;
  t0 = performance.now();
  for (let i = 0, at = 0; at < o.pcm.length; i++, at += bytes) {
    const due = t0 + i * o.frameMs;
    const wait = due - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    ws.send(o.pcm.subarray(at, Math.min(at + bytes, o.pcm.length)));
  }
  await new Promise((r) => setTimeout(r, o.waitS * 1000));
  ws.removeAllListeners('close');
  ws.close(1000);
  const speechStart = t0 + o.span.startS * 1000;
  const speechEnd = t0 + o.span.endS * 1000;
  const first = arrivals[0];
  // The segment that covers the end of the speech: its words end within the last second of it.
  const last = arrivals.find((a) => a.endS >= o.span.endS - 1);
  return { firstMs: first ? first.at - speechStart : null, lastMs: last ? last.at - speechEnd : null, segments: words.size, words: [...words.values()].reduce((n, k) => n + k, 0) };
}

/** @param {Record<string, string | true>} options */
export async function run(options) {
  const smoke = options.smoke === true;
  const sessions = Number(options.sessions ?? (smoke ? 1 : 2));
  const waitS = Number(options['wait-s'] ?? (smoke ? 2 : 4));
  const frameMs = Number(options['frame-ms'] ?? 100);
  const m = machine();
  const pcm = render(smoke ? TEXT.slice(0, TEXT.indexOf('.') + 1) : TEXT);
  const span = speechSpan(pcm);
  const service = await startService({ env: { STT_PROVIDERS: '', MAX_SESSIONS_PER_USER: '100' } });
  try {
    const uids = Array.from({ length: sessions }, (_, i) => `local-bench-${i}`);
    const tokens = await signTokens(service.env, uids, 3600);
    const results = await Promise.all(
      uids.map(async (uid, i) => {
        await new Promise((r) => setTimeout(r, i * 1000 * Math.random()));
        return session({ port: service.port, uid, token: tokens[i] ?? '', pcm, frameMs, span, waitS });
      }),
    );
    const firsts = results.map((r) => r.firstMs).filter((x) => x !== null);
    const lasts = results.map((r) => r.lastMs).filter((x) => x !== null);
    const ms = (/** @type {number | null} */ x) => (x === null ? 'n/a' : `${Math.round(x)}`);
    const p50f = pct(firsts, 50);
    const p99f = pct(firsts, 99);
    const p50l = pct(lasts, 50);
    const p99l = pct(lasts, 99);
    return finish(
      {
        scenario: 'local-latency',
        version: 2,
        startedAt: new Date().toISOString(),
        machine: m,
        options: { sessions, waitS, frameMs, smoke },
        baseline: `speech from ${span.startS.toFixed(2)} to ${span.endS.toFixed(2)} s of ${span.lengthS.toFixed(1)} s of audio, streamed in real time; no frame for ${waitS} s after it`,
        summary: {
          head: ['figure', 'p50', 'p99', 'sessions'],
          rows: [
            ['first words after speech starts (ms)', ms(p50f), ms(p99f), `${firsts.length}/${sessions}`],
            ['last words after speech ends, no frames (ms)', ms(p50l), ms(p99l), `${lasts.length}/${sessions}`],
          ],
        },
        figures: figuresOf({ 'first-word latency p50': [p50f, 'ms', 'lower'], 'first-word latency p99': [p99f, 'ms', 'lower'], 'last-word latency p50': [p50l, 'ms', 'lower'], 'last-word latency p99': [p99l, 'ms', 'lower'] }),
        tables: [{ title: 'sessions', head: ['session', 'first (ms)', 'last (ms)', 'segments', 'words'], rows: results.map((r, i) => [String(i), ms(r.firstMs), ms(r.lastMs), String(r.segments), String(r.words)]) }],
        notes: ['n/a: no segment came while the socket was open'],
      },
      options,
    );
  } finally {
    await service.stop();
  }
}
