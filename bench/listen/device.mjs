// One simulated wearable in a generator process (devices.mjs): its session's life, its frames at real-time pace, its
// keep-alives, and the latency of the segments the server sends back.
import { openRawWs, maskedFrame, OP } from './raw-ws.mjs';

export const KEEP_ALIVE = maskedFrame(OP.BINARY, Buffer.from([0]));
const SUGGEST_EVERY_MS = 2000;

/**
 * @typedef {object} Generator what a device shares with the others of its process
 * @property {import('./devices.mjs').InitMessage} cfg
 * @property {Buffer[]} frames the fixture's frames, pre-masked
 * @property {number} frameMs audio per frame
 * @property {number} bytesPerMs wire bytes per ms of audio (the frames' mean, headers included): a backlog in ms
 * @property {import('./devices.mjs').Counters} stats
 * @property {import('../lib/histogram.mjs').Histogram} segLatency
 * @property {import('../lib/histogram.mjs').Histogram} lateness
 * @property {import('../lib/histogram.mjs').Histogram} ackLatency from the send of the frame that completes an
 *   audio_ack's offset to the ack's arrival (ack=enabled sessions)
 * @property {{ count: number, minS: number, maxS: number } | undefined} churn
 * @property {number} connecting upgrades in flight
 * @property {() => void} connected an upgrade finished (answered or refused)
 * @property {(d: Device) => void} schedule puts a streaming device on the schedule by its `key`
 * @property {(d: Device) => void} gone the device's connection is gone
 */

const rand = (/** @type {number} */ mean) => -Math.log(1 - Math.random()) * mean;
/** Counts one more `key` in a tally of close codes or refusals. */
const count = (/** @type {Record<string, number>} */ tally, /** @type {string} */ key) => (tally[key] = (tally[key] ?? 0) + 1);

export class Device {
  /** @type {ReturnType<typeof openRawWs> | undefined} */
  ws;
  /** 'none' | 'connecting' | 'open' (upgraded, not ready) | 'ready' | 'streaming' | 'closing' */
  state = 'none';
  wantStream = false;
  /** The server's last close of this slot was a 1013 refusal before the session was ready (busy or full). */
  refused = false;
  /** performance.now() before which the device does not connect again (its backoff after a refusal). */
  retryAt = 0;
  inHeap = false;
  key = 0;
  frame = 0;
  /** Audio position of the next frame, in ms since this session's first frame. */
  posMs = 0;
  /** Time (performance.now) at which audio position 0 was captured; moves on by each pause. */
  t0 = 0;
  /** [posMs, t0] from each (re)start: when the audio at a position left the device. */
  breaks = /** @type {[number, number][]} */ ([]);
  /** While paused: when the pause ends, and when the audio it interrupts would have been captured. */
  pauseUntil = 0;
  pauseStartedAt = 0;
  nextPausePosMs = Infinity;
  keepAliveAt = 0;
  nextSuggestPosMs = SUGGEST_EVERY_MS;
  maxSegEnd = 0;
  endAt = Infinity;
  /** [session offset at a frame's end, when it was sent], oldest first, until an audio_ack covers it. */
  unacked = /** @type {[number, number][]} */ ([]);
  /** Session offset of the next frame (ack offsets count from the session's first frame, pauses excluded). */
  sessionMs = 0;

  /**
   * @param {Generator} g
   * @param {number} slot
   * @param {string} uid
   * @param {string} token
   */
  constructor(g, slot, uid, token) {
    this.g = g;
    this.slot = slot;
    this.uid = uid;
    this.token = token;
  }

  connect() {
    const { cfg, stats } = this.g;
    this.state = 'connecting';
    this.g.connecting++;
    let wasReady = false;
    this.ws = openRawWs(
      { host: cfg.host, port: cfg.port, pathQuery: `/v4/listen?uid=${encodeURIComponent(this.uid)}&${cfg.query}`, headers: { Authorization: `Bearer ${this.token}` } },
      {
        onOpen: () => {
          this.g.connected();
          this.state = 'open';
          stats.opened++;
        },
        onRefused: (status, why) => {
          this.g.connected();
          count(stats.refused, status === 0 ? `0 (${why})` : String(status));
        },
        onText: (text) => {
          if (text === 'ping') return;
          if (text.charCodeAt(0) === 91) return this.#segments(text); // '['
          if (text.startsWith('{"type":"audio_ack"')) return this.#ack(text);
          if (this.state === 'open' && text.includes('"status":"ready"')) {
            wasReady = true;
            this.refused = false;
            this.state = 'ready';
            this.keepAliveAt = performance.now() + cfg.keepAliveMs;
            if (this.wantStream) this.startStreaming();
          } else if (text.includes('"stt_failed"')) stats.sttFailed++;
        },
        onCloseFrame: (code) => {
          // 1013 before the session was ready is the server refusing it (busy or full): a refusal, retried later.
          this.refused = code === 1013 && this.state === 'open';
          if (this.refused) count(stats.refused, '1013');
          else if (this.state !== 'closing') count(stats.unexpected, `${code} ${this.state}`);
          this.state = 'closing';
        },
        onSocketClose: (_hadError, why) => {
          if (this.state !== 'closing' && this.state !== 'connecting') count(stats.unexpected, `1006 ${this.state}${why ? ` (${why})` : ''}`);
          if (wasReady) stats.closed++;
          this.state = 'none';
          this.ws = undefined;
          this.g.gone(this);
        },
      },
    );
  }

  /** Starts the clock of this session's audio; the first frame leaves one frame (or burst) later, at a random phase. */
  startStreaming() {
    const { cfg, frames, frameMs } = this.g;
    const now = performance.now();
    this.state = 'streaming';
    this.g.stats.streams++;
    this.frame = Math.floor((this.slot * 7919) % frames.length);
    this.posMs = 0;
    this.t0 = now + Math.random() * frameMs;
    this.breaks = [[0, this.t0]];
    this.pauseUntil = 0;
    this.maxSegEnd = 0;
    this.sessionMs = 0;
    this.unacked = [];
    this.nextSuggestPosMs = SUGGEST_EVERY_MS;
    this.nextPausePosMs = cfg.pauseEveryS > 0 ? rand(cfg.pauseEveryS * 1000) : Infinity;
    const churn = this.g.churn;
    if (churn) this.endAt = now + (churn.minS + Math.random() * (churn.maxS - churn.minS)) * 1000;
    this.key = this.t0 + frameMs * cfg.burst;
    this.g.schedule(this);
  }

  /** Sends what is due at `now`; returns false when the device leaves the heap. */
  step(/** @type {number} */ now) {
    const { cfg, frames, frameMs, stats } = this.g;
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
    this.g.lateness.record(now - due);
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
    this.sessionMs += frameMs * cfg.burst;
    if (cfg.ack) this.unacked.push([this.sessionMs, now]);
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

  /** A custom-STT app: the last 2 s of audio as one suggested segment. */
  #suggest(/** @type {import('node:net').Socket} */ socket) {
    const { stats } = this.g;
    const end = this.nextSuggestPosMs / 1000;
    const seg = { text: 'bench speech', speaker: 'SPEAKER_00', speaker_id: 0, start: end - SUGGEST_EVERY_MS / 1000, end, is_user: true, person_id: null };
    socket.write(maskedFrame(OP.TEXT, Buffer.from(JSON.stringify({ type: 'suggested_transcript', segments: [seg], stt_provider: 'bench' }))));
    stats.suggested++;
    this.nextSuggestPosMs += SUGGEST_EVERY_MS;
  }

  /** Segments from the server: the latency of the newest end time, from when that audio left the device. */
  #segments(/** @type {string} */ text) {
    const { stats } = this.g;
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
      this.g.segLatency.record(now - (t0 + posMs));
    }
  }

  /** An audio_ack: the latency from the send of the frame that completed its offset. */
  #ack(/** @type {string} */ text) {
    const offset = /** @type {{ offset_ms: number }} */ (JSON.parse(text)).offset_ms;
    let sentAt = NaN;
    while (this.unacked.length > 0 && /** @type {[number, number]} */ (this.unacked[0])[0] <= offset) sentAt = /** @type {[number, number]} */ (this.unacked.shift())[1];
    if (Number.isFinite(sentAt)) this.g.ackLatency.record(performance.now() - sentAt);
  }

  idleKeepAlive(/** @type {number} */ now) {
    if (this.state === 'ready' && now >= this.keepAliveAt && this.ws) {
      this.ws.socket.write(KEEP_ALIVE);
      this.g.stats.keepAlives++;
      this.keepAliveAt = now + this.g.cfg.keepAliveMs;
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
