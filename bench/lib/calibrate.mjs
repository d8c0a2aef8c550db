// How fast the machine is during a run at what the listen benches spend most on (system calls, loopback TCP, a round
// trip to a sleeping thread), printed with each run so that a slow machine is not read as a regression.
import { once } from 'node:events';
import { closeSync, openSync, writeSync } from 'node:fs';
import net from 'node:net';
import { Worker } from 'node:worker_threads';

const SYSCALLS = 200_000;
const MESSAGES = 20_000;
const MESSAGE_BYTES = 3200;
const BURST = 50;
const ROUND_TRIPS = 1000;

/** CPU seconds this process has used (all threads). */
const cpuS = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
};
const round2 = (/** @type {number} */ x) => Math.round(x * 100) / 100;

/** µs of CPU per one-byte write(2) to /dev/null. */
function syscallUs() {
  const fd = openSync('/dev/null', 'w');
  const b = Buffer.alloc(1);
  try {
    const c0 = cpuS();
    for (let i = 0; i < SYSCALLS; i++) writeSync(fd, b);
    return ((cpuS() - c0) / SYSCALLS) * 1e6;
  } finally {
    closeSync(fd);
  }
}

/** µs of CPU per 3,200-byte message written on one loopback TCP socket and read on the other (both in this process). */
async function loopbackUs() {
  const server = net.createServer();
  server.listen(0, '127.0.0.1');
  await new Promise((r) => server.once('listening', r));
  const port = /** @type {import('node:net').AddressInfo} */ (server.address()).port;
  const accepted = new Promise((/** @type {(s: import('node:net').Socket) => void} */ r) => server.once('connection', r));
  const client = net.connect(port, '127.0.0.1');
  client.setNoDelay(true);
  await new Promise((r) => client.once('connect', r));
  const peer = await accepted;
  const message = Buffer.alloc(MESSAGE_BYTES, 1);
  const want = MESSAGES * MESSAGE_BYTES;
  let got = 0;
  const c0 = cpuS();
  const done = new Promise((/** @type {(v?: unknown) => void} */ r) =>
    peer.on('data', (d) => {
      got += d.length;
      if (got >= want) r();
    }),
  );
  // Bursts of writes per event-loop turn, as a decode task's answer completes many sessions' messages at once.
  for (let sent = 0; sent < MESSAGES; sent += BURST) {
    for (let i = 0; i < BURST; i++) client.write(message);
    await new Promise((r) => setImmediate(r));
  }
  await done;
  const us = ((cpuS() - c0) / MESSAGES) * 1e6;
  client.destroy();
  peer.destroy();
  await new Promise((r) => server.close(r));
  return us;
}

/**
 * µs of CPU (both threads) per message posted to a worker thread that sleeps waiting for it, and its answer posted back
 * to this thread, which sleeps waiting in turn: two wake-ups of an idle thread, as in a codec shard's decode task.
 */
async function threadRoundTripUs() {
  const worker = new Worker("const { parentPort } = require('node:worker_threads'); parentPort.on('message', (m) => parentPort.postMessage(m));", { eval: true });
  try {
    await once(worker, 'online');
    for (let i = 0; i < 50; i++) {
      worker.postMessage(i);
      await once(worker, 'message');
    }
    const c0 = cpuS();
    for (let i = 0; i < ROUND_TRIPS; i++) {
      worker.postMessage(i);
      await once(worker, 'message');
    }
    return ((cpuS() - c0) / ROUND_TRIPS) * 1e6;
  } finally {
    await worker.terminate();
  }
}

/**
 * The machine's speed now: µs per system call, per loopback message and per round trip to a sleeping thread.
 * @returns {Promise<{ syscallUs: number, loopbackMessageUs: number, threadRoundTripUs: number }>}
 */
export async function calibrate() {
  return { syscallUs: round2(syscallUs()), loopbackMessageUs: round2(await loopbackUs()), threadRoundTripUs: round2(await threadRoundTripUs()) };
}

/**
 * The calibration figures as the machine line gives them (results from before the thread round trip lack it).
 * @param {{ syscallUs: number, loopbackMessageUs: number, threadRoundTripUs?: number }} c
 */
export function calibrationText(c) {
  const hop = c.threadRoundTripUs === undefined ? '' : `, per round trip to a sleeping thread ${c.threadRoundTripUs}`;
  return `CPU µs per system call ${c.syscallUs}, per 3.2 kB loopback TCP message ${c.loopbackMessageUs}${hop}`;
}
