// CPU of acknowledged audio's log path alone, in one process without sockets: N sessions on one DurableAudio
// (dist/), each taking a 40-byte Opus packet every 20 ms in real time while its own one-second passes write and sync
// real files; prints process CPU (main and libuv threads) and acknowledgements per session-second.
// `node bench/scripts/ack-log-cost.mjs [--sessions 320] [--seconds 20] [--root DIR]` (--root: another checkout's
// build, to compare two versions back to back).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { fileURLToPath } from 'node:url';

const { values } = parseArgs({ options: { sessions: { type: 'string', default: '320' }, seconds: { type: 'string', default: '20' }, root: { type: 'string' } } });
const root = values.root ?? fileURLToPath(new URL('../../', import.meta.url));
const sessions = Number(values.sessions);
const seconds = Number(values.seconds);
const load = (/** @type {string} */ p) => import(path.join(root, 'dist/engine', p));
const { DurableAudio } = await load('listen/durable-audio.js');
const { LocalAudioLogStore } = await load('listen/audio-log.js');
const { Scheduler } = await load('scheduler.js');
const { systemClock } = await load('clock.js');
const { createLogger } = await load('logger.js');

const dir = mkdtempSync(path.join(tmpdir(), 'ack-log-cost-'));
const scheduler = new Scheduler({ clock: systemClock });
const d = new DurableAudio({ store: new LocalAudioLogStore(dir), clock: systemClock, scheduler, logger: createLogger('silent'), writer: 'bench', maxSessionBytes: 1e12, maxNodeBytes: 1e12 });
let acks = 0;
/** @type {any[]} */
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
acks = 0;
const cpu0 = process.cpuUsage();
const feed = setInterval(() => {
  for (const c of connections) {
    message.set(packet);
    c.take(message);
  }
}, 20);
await new Promise((r) => setTimeout(r, seconds * 1000));
clearInterval(feed);
const cpu = process.cpuUsage(cpu0);
const per = (/** @type {number} */ us) => Math.round(us / (sessions * seconds));
console.log(JSON.stringify({ root, sessions, seconds, cpuUsPerSessionSecond: per(cpu.user + cpu.system), userUs: per(cpu.user), systemUs: per(cpu.system), acksPerSessionSecond: Math.round((acks / (sessions * seconds)) * 100) / 100 }));
await d.close();
scheduler.close?.();
rmSync(dir, { recursive: true, force: true });
process.exit(0);
