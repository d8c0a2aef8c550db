// How fast this box is today at what the listen benches spend most of their time on: system calls and loopback TCP.
//
// Rationale: the same build measured on one VM on different days cost 1.9× more CPU per session on one day than on
// another (bare server and generator alike), with no CPU time reported stolen. Two figures printed with every run
// tell such a day from a regression: the cost of one system call and of one 3,200-byte message (100 ms of 16 kHz PCM,
// what the service sends its provider) over a loopback TCP connection, sender and receiver together.
import { closeSync, openSync, writeSync } from 'node:fs';
import net from 'node:net';

const SYSCALLS = 200_000;
const MESSAGES = 20_000;
const MESSAGE_BYTES = 3200;
const BURST = 50;

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
 * The box's speed today: µs per system call and per loopback message (~0.5 s of CPU).
 * @returns {Promise<{ syscallUs: number, loopbackMessageUs: number }>}
 */
export async function calibrate() {
  return { syscallUs: round2(syscallUs()), loopbackMessageUs: round2(await loopbackUs()) };
}
