// A generator process: many simulated wearables (device.mjs) on raw sockets streaming shared pre-masked frames, driven
// over IPC by device-fleet.mjs and reporting once a second; one timer serves every device, so the generator stays cheap.
import { maskedFrame, OP } from './raw-ws.mjs';
import { readFixture } from './fixtures.mjs';
import { Histogram } from '../lib/histogram.mjs';
import { Device } from './device.mjs';

/**
 * @typedef {object} InitMessage
 * @property {'init'} type
 * @property {string} host
 * @property {number} port
 * @property {string} query everything after `uid=…&` (codec, sample_rate, …)
 * @property {string} fixtureFile
 * @property {{ uid: string, token: string }[]} devices one slot each
 * @property {number} keepAliveMs
 * @property {number} burst frames sent together (a phone forwarding several BLE packets at once)
 * @property {number} pauseEveryS mean seconds of audio between two pauses of one device (0: never)
 * @property {number} pauseS mean length of a pause, in seconds
 * @property {boolean} ack sessions opened with ack=enabled: time each audio_ack from the frame that completes it
 * @property {boolean} suggest send suggested_transcript every 2 s of audio (sessions opened with custom_stt=enabled)
 * @property {number} handshakes upgrades in flight at once
 */

/** @typedef {typeof counters} Counters */
const counters = { opened: 0, streams: 0, closed: 0, refused: /** @type {Record<string, number>} */ ({}), unexpected: /** @type {Record<string, number>} */ ({}), frames: 0, bytes: 0, audioMs: 0, keepAlives: 0, suggested: 0, segments: 0, sttFailed: 0, pauses: 0 };

/** Streaming devices by `key` (when they next have something to send): a binary min-heap. */
const heap = /** @type {Device[]} */ ([]);
const at = (/** @type {number} */ i) => /** @type {Device} */ (heap[i]);
function heapPush(/** @type {Device} */ d) {
  d.inHeap = true;
  heap.push(d);
  for (let i = heap.length - 1; i > 0; ) {
    const p = (i - 1) >> 1;
    if (at(p).key <= d.key) break;
    heap[i] = at(p);
    heap[p] = d;
    i = p;
  }
}
function heapPop() {
  const top = at(0);
  const last = /** @type {Device} */ (heap.pop());
  if (heap.length > 0) {
    heap[0] = last;
    for (let i = 0; ; ) {
      const l = 2 * i + 1;
      let m = l < heap.length && at(l).key < last.key ? l : i;
      if (l + 1 < heap.length && at(l + 1).key < at(m).key) m = l + 1;
      if (m === i) break;
      heap[i] = at(m);
      heap[m] = last;
      i = m;
    }
  }
  top.inHeap = false;
  return top;
}

/** @type {NodeJS.Timeout | undefined} */
let timer;
let timerAt = Infinity;
let looping = false;
/** Arms the one timer for the earliest device (Node rounds a delay up to 1 ms: a device leaves at most ~1 ms late). */
function arm() {
  const next = heap.length > 0 ? at(0).key : Infinity;
  if (looping || next >= timerAt) return;
  clearTimeout(timer);
  timerAt = next;
  timer = setTimeout(loop, Math.max(0, next - performance.now()));
}
function loop() {
  timerAt = Infinity;
  looping = true;
  const now = performance.now();
  while (heap.length > 0 && at(0).key <= now) {
    const d = heapPop();
    if (d.step(now)) heapPush(d);
  }
  looping = false;
  arm();
}

/** @type {Device[]} */
const connectQueue = [];
function queueConnect(/** @type {Device} */ d) {
  // A device backing off after a 1013 refusal waits it out, however often the parent asks for its slot meanwhile.
  if (d.state !== 'none' || performance.now() < d.retryAt) return;
  d.state = 'connecting';
  connectQueue.push(d);
  pumpConnects();
}
function pumpConnects() {
  while (g.connecting < g.cfg.handshakes && connectQueue.length > 0) {
    const d = /** @type {Device} */ (connectQueue.shift());
    if (d.state === 'connecting' && !d.ws) d.connect();
  }
}

/** @type {import('./device.mjs').Generator} */
const g = {
  cfg: /** @type {any} */ (undefined),
  frames: [],
  frameMs: 20,
  bytesPerMs: 1,
  stats: counters,
  segLatency: new Histogram(),
  lateness: new Histogram(),
  ackLatency: new Histogram(),
  churn: undefined,
  connecting: 0,
  connected() {
    g.connecting--;
    pumpConnects();
  },
  schedule(d) {
    if (!d.inHeap) heapPush(d);
    arm();
  },
  gone(d) {
    // Churn: the slot comes back as a new session after a short gap. Otherwise a slot still wanted (a session closed
    // by the server, or one that was still closing when the parent asked for it again) reconnects at once.
    // A session the server refused with 1013 (busy or full) tries again after 1-3 s, as a device backing off would.
    const again = () => g.churn !== undefined && d.slot < g.churn.count && d.state === 'none';
    const still = () => g.churn === undefined && d.slot < wanted.count && d.state === 'none';
    const backoffMs = () => {
      const ms = 1000 + Math.random() * 2000;
      d.retryAt = performance.now() + ms - 10; // the timer below must find it due
      return ms;
    };
    if (again()) setTimeout(() => again() && ((d.wantStream = true), queueConnect(d)), d.refused ? backoffMs() : Math.random() * 500);
    else if (still() && d.refused) setTimeout(() => still() && ((d.wantStream = wanted.stream), queueConnect(d)), backoffMs());
    else if (still()) {
      d.wantStream = wanted.stream;
      queueConnect(d);
    }
  },
};
/** @type {Device[]} */
const slots = [];
/** The parent's last 'open': slots below `count` should have a session (streaming when `stream`). */
const wanted = { count: 0, stream: false };

function counts() {
  const c = { connecting: 0, open: 0, ready: 0, streaming: 0, paused: 0, backlogBytes: 0, backlogMaxMs: 0 };
  for (const d of slots) {
    if (d.state === 'connecting') c.connecting++;
    else if (d.state === 'open') c.open++;
    else if (d.state === 'ready') c.ready++;
    else if (d.state === 'streaming') {
      c.streaming++;
      if (d.pauseUntil > 0) c.paused++;
    }
    const backlog = d.ws?.socket.writableLength ?? 0;
    c.backlogBytes += backlog;
    if (backlog > 0) c.backlogMaxMs = Math.max(c.backlogMaxMs, backlog / g.bytesPerMs);
  }
  return c;
}

function report(/** @type {string} */ type) {
  const cpu = process.cpuUsage();
  process.send?.({ type, ...counters, ...counts(), segLatency: g.segLatency.toJSON(), lateness: g.lateness.toJSON(), ackLatency: g.ackLatency.toJSON(), cpuS: (cpu.user + cpu.system) / 1e6 });
  g.segLatency.reset();
  g.lateness.reset();
  g.ackLatency.reset();
}

process.on('message', (/** @type {any} */ m) => {
  switch (m.type) {
    case 'init': {
      g.cfg = m;
      const fx = readFixture(m.fixtureFile);
      g.frameMs = fx.frameMs;
      g.frames = fx.frames.map((f) => maskedFrame(OP.BINARY, f));
      g.bytesPerMs = g.frames.reduce((n, f) => n + f.length, 0) / (g.frames.length * g.frameMs);
      for (const [i, d] of m.devices.entries()) slots.push(new Device(g, i, d.uid, d.token));
      setInterval(() => {
        const now = performance.now();
        for (const d of slots) d.idleKeepAlive(now);
      }, 1000);
      setInterval(() => report('tick'), 1000);
      process.send?.({ type: 'inited' });
      break;
    }
    case 'open': // bring the open sessions to `count` (slots 0…count-1); `stream`: stream once ready
      wanted.count = m.count;
      wanted.stream = m.stream;
      for (const d of slots) {
        if (d.slot < m.count) {
          d.wantStream = m.stream;
          if (d.state === 'none') queueConnect(d);
          else if (m.stream && d.state === 'ready') d.startStreaming();
        } else d.close();
      }
      break;
    case 'stream':
      wanted.stream = true;
      for (const d of slots) {
        d.wantStream = true;
        if (d.state === 'ready') d.startStreaming();
      }
      break;
    case 'churn':
      g.churn = { count: m.count, minS: m.minS, maxS: m.maxS };
      for (const d of slots) if (d.slot < m.count && d.state === 'none') d.wantStream = true, queueConnect(d);
      break;
    case 'stop': {
      g.churn = undefined;
      wanted.count = 0;
      connectQueue.length = 0;
      for (const d of slots) d.close();
      const deadline = Date.now() + (m.timeoutMs ?? 30_000);
      const wait = setInterval(() => {
        if (slots.every((d) => d.state === 'none') || Date.now() > deadline) {
          clearInterval(wait);
          report('stopped');
        }
      }, 50);
      break;
    }
    case 'exit':
      for (const d of slots) d.ws?.socket.destroy();
      process.exit(0);
  }
});
process.on('disconnect', () => process.exit(0));
