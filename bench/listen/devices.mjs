// A generator process: simulated wearables on raw sockets (raw-ws.mjs), each streaming the shared pre-masked frames of
// one codec at real-time pace from its own offset, with keep-alives and optional pauses; driven by its parent over IPC
// (device-fleet.mjs) and reporting counters and latency histograms once a second.
import { openRawWs, maskedFrame, OP } from './raw-ws.mjs';
import { readFixture } from './fixtures.mjs';
import { Histogram } from '../lib/histogram.mjs';

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
 * @property {boolean} suggest send suggested_transcript every 2 s of audio (sessions opened with custom_stt=enabled)
 * @property {number} handshakes upgrades in flight at once
 */

/** @type {InitMessage} */
let cfg;
/** @type {Buffer[]} */
let frames = [];
let frameMs = 20;
const KEEP_ALIVE = maskedFrame(OP.BINARY, Buffer.from([0]));
const SUGGEST_EVERY_MS = 2000;

const stats = { opened: 0, closed: 0, refused: /** @type {Record<string, number>} */ ({}), unexpected: /** @type {Record<string, number>} */ ({}), frames: 0, bytes: 0, audioMs: 0, keepAlives: 0, suggested: 0, segments: 0, sttFailed: 0, pauses: 0 };
const segLatency = new Histogram();
const lateness = new Histogram();
/** @type {Device[]} */
const slots = [];
/** @type {Device[]} */
const connectQueue = [];
let connecting = 0;
/** Churn: slots below this count reconnect after closing, streaming for minS…maxS seconds each time. */
let churn = /** @type {{ count: number, minS: number, maxS: number } | undefined} */ (undefined);

/** Min-heap of streaming devices by `key` (the time of their next frame or keep-alive). */
const heap = /** @type {Device[]} */ ([]);
function heapPush(/** @type {Device} */ d) {
  d.inHeap = true;
  heap.push(d);
  for (let i = heap.length - 1; i > 0; ) {
    const p = (i - 1) >> 1;
    if (/** @type {Device} */ (heap[p]).key <= d.key) break;
    heap[i] = /** @type {Device} */ (heap[p]);
    heap[p] = d;
    i = p;
  }
}
function heapPop() {
  const top = /** @type {Device} */ (heap[0]);
  const last = /** @type {Device} */ (heap.pop());
  if (heap.length > 0) {
    heap[0] = last;
    for (let i = 0; ; ) {
      const l = 2 * i + 1;
      const r = l + 1;
      let m = i;
      if (l < heap.length && /** @type {Device} */ (heap[l]).key < /** @type {Device} */ (heap[m]).key) m = l;
      if (r < heap.length && /** @type {Device} */ (heap[r]).key < /** @type {Device} */ (heap[m]).key) m = r;
      if (m === i) break;
      heap[i] = /** @type {Device} */ (heap[m]);
      heap[m] = last;
      i = m;
    }
  }
  top.inHeap = false;
  return top;
}

const rand = (/** @type {number} */ mean) => -Math.log(1 - Math.random()) * mean;

class Device {
  /** @type {ReturnType<typeof openRawWs> | undefined} */
  ws;
  /** 'none' | 'connecting' | 'open' (upgraded, not ready) | 'ready' | 'streaming' | 'closing' */
  state = 'none';
  wantStream = false;
  inHeap = false;
  key = 0;
  frame = 0;
  /** Audio position of the next frame, in ms since this session's first frame. */
  posMs = 0;
  /** Time (performance.now) at which audio position 0 was captured; moves on by each pause. */
  t0 = 0;
  /** [posMs, t0] from each (re)start: when the audio at a position left the device. */
  breaks = /** @type {[number, number][]} */ ([]);
  pauseUntil = 0;
  nextPausePosMs = Infinity;
  keepAliveAt = 0;
  nextSuggestPosMs = SUGGEST_EVERY_MS;
  maxSegEnd = 0;
  endAt = Infinity;

  /** @param {number} slot @param {string} uid @param {string} token */
  constructor(slot, uid, token) {
    this.slot = slot;
    this.uid = uid;
    this.token = token;
  }

  connect() {
    this.state = 'connecting';
    connecting++;
    let wasReady = false;
    this.ws = openRawWs(
      { host: cfg.host, port: cfg.port, pathQuery: `/v4/listen?uid=${encodeURIComponent(this.uid)}&${cfg.query}`, headers: { Authorization: `Bearer ${this.token}` } },
      {
        onOpen: () => {
          connecting--;
          pumpConnects();
          this.state = 'open';
          stats.opened++;
        },
        onRefused: (status) => {
          connecting--;
          pumpConnects();
          stats.refused[status] = (stats.refused[status] ?? 0) + 1;
        },
        onText: (text) => {
          if (text === 'ping') return;
          if (text.charCodeAt(0) === 91) return this.#segments(text); // '['
          if (this.state === 'open' && text.includes('"status":"ready"')) {
            wasReady = true;
            this.state = 'ready';
            this.keepAliveAt = performance.now() + cfg.keepAliveMs;
            if (this.wantStream) this.startStreaming();
          } else if (text.includes('"stt_failed"')) stats.sttFailed++;
        },
        onCloseFrame: (code) => {
          if (this.state !== 'closing') stats.unexpected[code] = (stats.unexpected[code] ?? 0) + 1;
          this.state = 'closing';
        },
        onSocketClose: () => {
          if (this.state !== 'closing' && this.state !== 'connecting') stats.unexpected[1006] = (stats.unexpected[1006] ?? 0) + 1;
          if (wasReady) stats.closed++;
          this.state = 'none';
          this.ws = undefined;
          if (churn && this.slot < churn.count) setTimeout(() => this.state === 'none' && churn && this.slot < churn.count && this.#churnStart(), Math.random() * 500);
        },
      },
    );
  }

  #churnStart() {
    this.wantStream = true;
    this.endAt = Infinity;
    queueConnect(this);
  }

  /** Starts the clock of this session's audio; the first frame leaves one frame (or burst) later, at a random phase. */
  startStreaming() {
    const now = performance.now();
    this.state = 'streaming';
    this.frame = Math.floor((this.slot * 7919) % frames.length);
    this.posMs = 0;
    this.t0 = now + Math.random() * frameMs;
    this.breaks = [[0, this.t0]];
    this.maxSegEnd = 0;
    this.nextSuggestPosMs = SUGGEST_EVERY_MS;
    this.nextPausePosMs = cfg.pauseEveryS > 0 ? rand(cfg.pauseEveryS * 1000) : Infinity;
    if (churn) this.endAt = now + (churn.minS + Math.random() * (churn.maxS - churn.minS)) * 1000;
    this.key = this.t0 + frameMs * cfg.burst;
    if (!this.inHeap) heapPush(this);
  }

  /** Sends what is due at `now`; returns false when the device leaves the heap. */
  step(/** @type {number} */ now) {
    const socket = this.ws?.socket;
    if (this.state !== 'streaming' || !socket) return false;
    if (now >= this.endAt) {
      this.close();
      return false;
    }
    if (now >= this.keepAliveAt) {
      socket.write(KEEP_ALIVE);
      stats.keepAlives++;
      this.keepAliveAt = now + cfg.keepAliveMs;
    }
    if (this.pauseUntil > 0) {
      if (now < this.pauseUntil) {
        this.key = Math.min(this.pauseUntil, this.keepAliveAt);
        return true;
      }
      this.t0 += this.pauseUntil - this.pauseStartedAt;
      this.breaks.push([this.posMs, this.t0]);
      this.pauseUntil = 0;
    }
    const due = this.t0 + this.posMs + frameMs * cfg.burst;
    if (now < due) {
      this.key = Math.min(due, this.keepAliveAt);
      return true;
    }
    lateness.record(now - due);
    if (cfg.burst > 1) socket.cork();
    for (let i = 0; i < cfg.burst; i++) {
      const f = /** @type {Buffer} */ (frames[this.frame]);
      socket.write(f);
      stats.frames++;
      stats.bytes += f.length;
      stats.audioMs += frameMs;
      this.frame = (this.frame + 1) % frames.length;
      this.posMs += frameMs;
    }
    if (cfg.burst > 1) socket.uncork();
    if (cfg.suggest && this.posMs >= this.nextSuggestPosMs) this.#suggest(socket);
    if (this.posMs >= this.nextPausePosMs) {
      this.pauseStartedAt = this.t0 + this.posMs;
      this.pauseUntil = now + rand(cfg.pauseS * 1000);
      this.nextPausePosMs = this.posMs + rand(cfg.pauseEveryS * 1000);
      stats.pauses++;
    }
    this.key = Math.min(this.pauseUntil || this.t0 + this.posMs + frameMs * cfg.burst, this.keepAliveAt);
    return true;
  }
  pauseStartedAt = 0;

  /** A custom-STT app: the last 2 s of audio as one suggested segment. */
  #suggest(/** @type {import('node:net').Socket} */ socket) {
    const end = this.nextSuggestPosMs / 1000;
    const seg = { text: 'bench speech', speaker: 'SPEAKER_00', speaker_id: 0, start: end - SUGGEST_EVERY_MS / 1000, end, is_user: true, person_id: null };
    socket.write(maskedFrame(OP.TEXT, Buffer.from(JSON.stringify({ type: 'suggested_transcript', segments: [seg], stt_provider: 'bench' }))));
    stats.suggested++;
    this.nextSuggestPosMs += SUGGEST_EVERY_MS;
  }

  /** Segments from the server: the latency of the newest end time, from when that audio left the device. */
  #segments(/** @type {string} */ text) {
    const now = performance.now();
    /** @type {{ end: number }[]} */
    let segs;
    try {
      segs = JSON.parse(text);
    } catch {
      return;
    }
    for (const s of segs) {
      stats.segments++;
      if (!(s.end > this.maxSegEnd) || this.breaks.length === 0) continue;
      this.maxSegEnd = s.end;
      const posMs = s.end * 1000;
      let t0 = /** @type {[number, number]} */ (this.breaks[0])[1];
      for (const [p, t] of this.breaks) if (p <= posMs) t0 = t;
      segLatency.record(now - (t0 + posMs));
    }
  }

  idleKeepAlive(/** @type {number} */ now) {
    if (this.state === 'ready' && now >= this.keepAliveAt && this.ws) {
      this.ws.socket.write(KEEP_ALIVE);
      stats.keepAlives++;
      this.keepAliveAt = now + cfg.keepAliveMs;
    }
  }

  close() {
    this.wantStream = false;
    this.endAt = Infinity;
    if (!this.ws) {
      if (this.state === 'connecting') this.state = 'none'; // still queued: never opened
      return;
    }
    if (this.state === 'closing') return;
    if (this.state === 'connecting') {
      this.ws.socket.destroy();
      return;
    }
    this.state = 'closing';
    this.ws.close(1000);
  }
}

function queueConnect(/** @type {Device} */ d) {
  if (d.state !== 'none') return;
  d.state = 'connecting';
  connectQueue.push(d);
  pumpConnects();
}
function pumpConnects() {
  while (connecting < cfg.handshakes && connectQueue.length > 0) {
    const d = /** @type {Device} */ (connectQueue.shift());
    if (d.state === 'connecting' && !d.ws) d.connect();
  }
}

function loop() {
  const now = performance.now();
  while (heap.length > 0 && /** @type {Device} */ (heap[0]).key <= now) {
    const d = heapPop();
    if (d.step(now)) heapPush(d);
  }
}

function counts() {
  const c = { connecting: 0, open: 0, ready: 0, streaming: 0, paused: 0, backlogBytes: 0 };
  for (const d of slots) {
    if (d.state === 'connecting') c.connecting++;
    else if (d.state === 'open') c.open++;
    else if (d.state === 'ready') c.ready++;
    else if (d.state === 'streaming') {
      c.streaming++;
      if (d.pauseUntil > 0) c.paused++;
    }
    c.backlogBytes += d.ws?.socket.writableLength ?? 0;
  }
  return c;
}

function report(/** @type {string} */ type) {
  const cpu = process.cpuUsage();
  process.send?.({ type, ...stats, ...counts(), segLatency: segLatency.toJSON(), lateness: lateness.toJSON(), cpuS: (cpu.user + cpu.system) / 1e6 });
  segLatency.reset();
  lateness.reset();
}

process.on('message', (/** @type {any} */ m) => {
  switch (m.type) {
    case 'init': {
      cfg = m;
      const fx = readFixture(m.fixtureFile);
      frameMs = fx.frameMs;
      frames = fx.frames.map((f) => maskedFrame(OP.BINARY, f));
      for (const [i, d] of m.devices.entries()) slots.push(new Device(i, d.uid, d.token));
      setInterval(loop, 1);
      setInterval(() => {
        const now = performance.now();
        for (const d of slots) d.idleKeepAlive(now);
      }, 1000);
      setInterval(() => report('tick'), 1000);
      process.send?.({ type: 'inited' });
      break;
    }
    case 'open': // bring the open sessions to `count` (slots 0…count-1); `stream`: stream once ready
      for (const d of slots) {
        if (d.slot < m.count) {
          d.wantStream = m.stream;
          if (d.state === 'none') queueConnect(d);
          else if (m.stream && d.state === 'ready') d.startStreaming();
        } else d.close();
      }
      break;
    case 'stream':
      for (const d of slots) {
        d.wantStream = true;
        if (d.state === 'ready') d.startStreaming();
      }
      break;
    case 'churn':
      churn = { count: m.count, minS: m.minS, maxS: m.maxS };
      for (const d of slots) if (d.slot < m.count && d.state === 'none') d.wantStream = true, queueConnect(d);
      break;
    case 'stop': {
      churn = undefined;
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
