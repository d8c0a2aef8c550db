// Bench: CPU per second of audio for each codec, through the codec shards (every session at once, as under load) vs
// the decoder called in-process. Run: node dist/scripts/bench-codecs.js [sessions=50] [outstanding=2] [codecs] [windowMs=0].
import { mkdtempSync, rmSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import path from 'node:path';
import { CodecPool, type Codec } from '../engine/codec/pool.js';
import type { CodecStream } from '../engine/codec/stream.js';
import { Lc3Decoder, Lc3Encoder } from '../native/index.js';
import { maxPacketSamples, OpusDecoder, OpusEncoderStream } from '../native/opus.js';
import { AacDecoder, AAC_MAX_FRAME_SAMPLES } from '../native/aac.js';
import { Resampler } from '../workers/resample.js';
import { aacAdts, frames, pcmMessages, speech } from '../test/helpers/codec-fixtures.js';

const sessions = Number(process.argv[2] ?? 50);
const perPush = Number(process.argv[3] ?? 2);
/** Optional comma-separated codec names: only those run. */
const only = process.argv[4]?.split(',').filter(Boolean);
/** The shards' batch window (the service's is BATCH_WINDOW_MS, engine/codec/pool.ts; it only holds back a task when the shard was idle). */
const windowMs = Number(process.argv[5] ?? 0);
const dir = mkdtempSync(path.join(tmpdir(), 'bench-codecs-'));
/** Measurements of each side per codec; the median is reported. */
const ROUNDS = 3;
/** CPU a direct round spends at least, in µs. */
const DIRECT_ROUND_US = 400_000;

const median = (xs: readonly number[]): number => [...xs].sort((a, b) => a - b)[xs.length >> 1] ?? NaN;

/** CPU µs of every thread of this process (getrusage RUSAGE_SELF). */
function cpuMicros(): number {
  const u = process.cpuUsage();
  return u.user + u.system;
}

interface Case {
  codec: Codec;
  rate: number;
  seconds: number;
  messages: Uint8Array[];
  /** Decodes every message in-process the cheapest direct way (into a reused array where the codec allows). */
  direct: () => void;
}

function buildCases(): Case[] {
  const s16 = speech(dir, 16000);
  const s8 = speech(dir, 8000);
  const s48 = speech(dir, 48000);
  const opus16 = new OpusEncoderStream(16000);
  const opusPackets = frames(s16, 160).map((f) => opus16.encode(f));
  const opus320 = new OpusEncoderStream(16000);
  const opusFs320 = frames(s16, 320).map((f) => opus320.encode(f));
  const lc3enc = new Lc3Encoder(10000, 16000);
  const lc3Frames = frames(s16, 160).map((f) => lc3enc.encode(f, 30));
  const lc3enc48 = new Lc3Encoder(10000, 48000);
  const lc3Frames48 = frames(s48, 480).map((f) => lc3enc48.encode(f, 100));
  const adts = aacAdts(dir, s48, 48000);
  const pcm8Messages = pcmMessages(s8, 80);
  return [
    { codec: 'pcm16', rate: 16000, seconds: s16.length / 16000, messages: pcmMessages(s16, 160), direct: () => {} },
    {
      codec: 'pcm8', rate: 8000, seconds: s8.length / 8000, messages: pcm8Messages,
      direct: () => { const r = new Resampler(8000); for (const m of pcm8Messages) r.push(new Int16Array(m.buffer)); },
    },
    {
      codec: 'opus', rate: 16000, seconds: s16.length / 16000, messages: opusPackets,
      direct: () => { const d = new OpusDecoder(16000); const out = new Int16Array(maxPacketSamples(16000)); for (const p of opusPackets) d.decodeInto(p, out, 0); d.release(); },
    },
    {
      codec: 'opus_fs320', rate: 16000, seconds: s16.length / 16000, messages: opusFs320,
      direct: () => { const d = new OpusDecoder(16000); const out = new Int16Array(maxPacketSamples(16000)); for (const p of opusFs320) d.decodeInto(p, out, 0); d.release(); },
    },
    {
      codec: 'lc3_fs1030', rate: 16000, seconds: s16.length / 16000, messages: lc3Frames,
      direct: () => { const d = new Lc3Decoder(10000, 16000); const out = new Int16Array(d.frameSamples); for (const f of lc3Frames) d.decodeInto(f, out, 0); },
    },
    {
      codec: 'lc3', rate: 48000, seconds: s48.length / 48000, messages: lc3Frames48,
      direct: () => { const d = new Lc3Decoder(10000, 48000); const r = new Resampler(48000); const out = new Int16Array(d.frameSamples); for (const f of lc3Frames48) { d.decodeInto(f, out, 0); r.push(out); } },
    },
    {
      codec: 'aac', rate: 48000, seconds: s48.length / 48000, messages: adts,
      direct: () => {
        const d = new AacDecoder();
        const r = new Resampler(48000);
        const out = new Int16Array(AAC_MAX_FRAME_SAMPLES);
        for (const f of adts) r.push(out.subarray(0, Math.max(0, d.decodeInto(f, out, 0))));
        d.close();
      },
    },
  ];
}

/**
 * Every stream keeps `per` messages outstanding: it pushes `per` at once, then one more for each that comes back
 * decoded (each bench message is one frame), until its messages are spent. So the shard always has audio staged when
 * a task returns, as on a loaded node, and neither thread sits idle between tasks (a wake from idle has a CPU cost of
 * its own, which would be measured instead of the engine). One listener per stream, no promise per
 * message: the harness costs little next to the engine path it measures.
 */
async function driveAll(streams: readonly CodecStream[], messages: readonly Uint8Array[], per: number): Promise<void> {
  let unfinished = streams.length;
  let wake = (): void => undefined;
  const done = new Promise<void>((resolve) => (wake = resolve));
  for (const s of streams) {
    let sent = 0;
    let back = 0;
    const refill = (): void => {
      while (sent < messages.length && sent - back < per) s.push(messages[sent++]!);
    };
    s.on('pcm', (_pcm, info) => {
      back += info.frames + info.corruptFrames;
      refill();
      if (back >= messages.length && --unfinished === 0) wake();
    });
    refill();
  }
  await done;
  await Promise.all(streams.map((s) => s.close()));
}

async function main(): Promise<void> {
  const cases = buildCases().filter((c) => only === undefined || only.includes(c.codec));
  const pool = new CodecPool({ threads: 1, batchWindowMs: windowMs });
  const rows: string[][] = [];
  for (const c of cases) {
    // Each side is measured ROUNDS times and the median kept. A direct round repeats the in-process decode until it
    // has used DIRECT_ROUND_US of CPU: a single short pass is too noisy to compare.
    const directRuns: number[] = [];
    for (let i = 0; i < ROUNDS; i++) {
      const t0 = cpuMicros();
      let passes = 0;
      do {
        c.direct();
        passes++;
      } while (cpuMicros() - t0 < DIRECT_ROUND_US);
      directRuns.push((cpuMicros() - t0) / (passes * c.seconds));
    }
    const directPerSec = median(directRuns);
    // Engine path: `sessions` concurrent sessions, `perPush` messages outstanding each.
    const engineRuns: number[] = [];
    let wallMs = 0;
    for (let i = 0; i < ROUNDS; i++) {
      const t0 = cpuMicros();
      const w0 = performance.now();
      const streams = Array.from({ length: sessions }, (_, k) => pool.open({ sessionId: `${c.codec}-${i}-${k}`, codec: c.codec, sampleRate: c.rate, channels: 1 }));
      await driveAll(streams, c.messages, perPush);
      engineRuns.push((cpuMicros() - t0) / (c.seconds * sessions));
      wallMs += performance.now() - w0;
    }
    const enginePerSec = median(engineRuns);
    rows.push([
      c.codec,
      String(c.rate),
      directPerSec.toFixed(0),
      enginePerSec.toFixed(0),
      directPerSec >= 1 ? (enginePerSec / directPerSec).toFixed(1) : 'n/a',
      ((ROUNDS * c.seconds * sessions * 1000) / wallMs).toFixed(0),
    ]);
    // Progress for bench/scripts/bench-codecs.mjs, which draws its bar from these lines.
    process.stderr.write(`bench-codecs: ${c.codec} done (${rows.length}/${cases.length})\n`);
  }
  await pool.close();
  rmSync(dir, { recursive: true, force: true });
  console.log(`machine: ${cpus().length}× ${cpus()[0]?.model ?? '?'}, node ${process.version}, ${sessions} sessions/codec, ${perPush} frame(s) outstanding each, batch window ${windowMs} ms, 1 shard`);
  console.log(`baseline: the decoder called in-process, repeated for at least ${DIRECT_ROUND_US / 1000} ms of CPU; each side the median of ${ROUNDS} rounds`);
  const head = ['codec', 'in Hz', 'direct µs/s', 'engine µs/s', 'ratio', 'x realtime (wall)'];
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  for (const r of [head, ...rows]) console.log(r.map((v, i) => v.padStart(widths[i]!)).join('  '));
}

await main();
