// CPU of acknowledged audio's log path alone, in one process: N sessions on one DurableAudio (dist/), each taking 50
// 40-byte Opus frames a second, one write pass a second on real files with fdatasync; prints process CPU (main and
// libuv threads) per session-second. `node bench/scripts/ack-log-cost.mjs [--sessions 320] [--seconds 20] [--root DIR]`
// (--root: another checkout's build, to compare two versions back to back).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { fileURLToPath } from 'node:url';

const { values } = parseArgs({ options: { sessions: { type: 'string', default: '320' }, seconds: { type: 'string', default: '20' }, root: { type: 'string' } } });
const root = values.root ?? fileURLToPath(new URL('../../', import.meta.url));
const sessions = Number(values.sessions);
const seconds = Number(values.seconds);
const load = (p) => import(path.join(root, 'dist/engine', p));
const { DurableAudio } = await load('listen/durable-audio.js');
const { LocalAudioLogStore } = await load('listen/audio-log.js');
const { Scheduler } = await load('scheduler.js');
const { ManualClock } = await load('clock.js');
const { createLogger } = await load('logger.js');

const dir = mkdtempSync(path.join(tmpdir(), 'ack-log-cost-'));
const clock = new ManualClock(Date.now());
const scheduler = new Scheduler({ clock, resolutionMs: 0 });
const d = new DurableAudio({ store: new LocalAudioLogStore(dir), clock, scheduler, logger: createLogger('silent'), writer: 'bench', maxSessionBytes: 1e12, maxNodeBytes: 1e12 });
let acks = 0;
const connections = [];
for (let i = 0; i < sessions; i++) {
  const c = d.connection({ sessionId: `s${i}-${process.pid}`, uid: 'u', codec: 'opus', sampleRate: 16000, channels: 1, language: 'en', source: 'omi' });
  await c.open({ send: () => acks++, accept: () => {}, close: () => {}, conversationId: () => undefined });
  connections.push(c);
}
// A 20 ms hybrid Opus packet (TOC config 15), lent for one call as uWS lends it.
const packet = new Uint8Array(40).fill(7);
packet[0] = 0x78;
const message = new Uint8Array(40);
const cpu0 = process.cpuUsage();
const wall0 = performance.now();
for (let s = 0; s < seconds; s++) {
  for (let f = 0; f < 50; f++) {
    for (const c of connections) {
      message.set(packet);
      c.take(message);
    }
    await new Promise((r) => setImmediate(r));
  }
  clock.advance(1000);
  await d.pass();
}
const cpu = process.cpuUsage(cpu0);
const per = (us) => Math.round(us / (sessions * seconds));
console.log(JSON.stringify({ root, sessions, seconds, cpuUsPerSessionSecond: per(cpu.user + cpu.system), userUs: per(cpu.user), systemUs: per(cpu.system), acks, wallS: Math.round(performance.now() - wall0) / 1000 }));
await d.close();
rmSync(dir, { recursive: true, force: true });
