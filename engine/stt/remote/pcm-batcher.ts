// Gathers a remote stream's PCM into messages of `sendSamples` before they go on its socket.
//
// Rationale: a socket write per 20 ms frame per session is the largest single cost of a loaded node, and providers
// take 20–250 ms messages. A steady stream sends whenever a message's worth is buffered, without a timer; a rest left
// by a pause is sent by the engine's StaleFlusher within two of its periods (under `minSamples` it waits for more
// audio or an explicit flush(), since providers refuse messages that short).
import type { PcmChunkPool } from './chunk-pool.js';
import type { StaleFlushable, StaleFlusher } from './stale-flusher.js';

/** 20 ms and 250 ms of 16 kHz audio: the message length bounds both providers take. */
export const MIN_SEND_SAMPLES = 320;
export const MAX_SEND_SAMPLES = 4000;

/** Samples per message for `sendMs` milliseconds of 16 kHz audio (STT_SEND_MS); throws outside 20–250 ms. */
export function sendSamplesOf(sendMs: number): number {
  if (!(sendMs >= 20 && sendMs <= 250)) throw new RangeError('sendMs must be in [20, 250]');
  return Math.round(sendMs * 16);
}

/**
 * A stream's first message length (PcmBatcherOptions.firstSamples): drawn with `random` between 20 ms and
 * `sendSamples` (RemoteEngineOptions.staggerFirst); without it, `sendSamples`.
 */
export function firstMessageSamples(sendSamples: number, random: (() => number) | undefined): number {
  return random ? MIN_SEND_SAMPLES + Math.floor(random() * (sendSamples - MIN_SEND_SAMPLES + 1)) : sendSamples;
}

export interface PcmBatcherOptions {
  /** Samples per message (a flush sends fewer). */
  sendSamples: number;
  /** The shortest message a stale rest may be sent as. */
  minSamples: number;
  flusher: StaleFlusher;
  /**
   * Where message arrays come from; its `samples` must equal `sendSamples`. The callee of `send` may give them back.
   * Without one each message is a fresh array.
   */
  pool?: PcmChunkPool;
  /**
   * Samples of the first message (minSamples to sendSamples). Streams that start together would otherwise complete
   * their messages together for as long as they run, and a decoder that holds audio back for them
   * (CodecStream.holdUntil()) would have all of it to decode at once; a first message of its own length per stream
   * spreads them. @defaultValue sendSamples
   */
  firstSamples?: number;
  /** Puts one message on the socket; the array (or a view of it, for a short one) is the callee's from then on. */
  send: (pcm: Int16Array) => void;
}

export class PcmBatcher implements StaleFlushable {
  readonly #o: PcmBatcherOptions;
  /** Audio waiting for a message's worth; allocated on first use. */
  #pending: Int16Array | undefined;
  #length = 0;
  /** Registered with the flusher: it stays between messages while the stream streams (stale-flusher.ts). */
  #registered = false;
  /** The rest's age in flusher ticks: -1 none, 0 begun since the last tick, 1 held at the last tick too. */
  #restAge = -1;
  /** Samples of the message being gathered: sendSamples, but for the first. */
  #target: number;

  constructor(o: PcmBatcherOptions) {
    if (o.pool && o.pool.samples !== o.sendSamples) throw new RangeError('pool.samples must equal sendSamples');
    this.#o = o;
    this.#target = Math.min(o.sendSamples, Math.max(o.minSamples, Math.round(o.firstSamples ?? o.sendSamples)));
  }

  /** Samples the message being gathered still lacks. */
  get samplesUntilSend(): number {
    return this.#target - this.#length;
  }

  /** Samples buffered, not yet sent. */
  get length(): number {
    return this.#length;
  }

  /** Buffers `pcm` (copied), sending a message each time `sendSamples` are buffered. */
  write(pcm: Int16Array): void {
    for (let off = 0; off < pcm.length; ) {
      const pending = (this.#pending ??= this.#o.pool?.take() ?? new Int16Array(this.#o.sendSamples));
      const n = Math.min(pcm.length - off, this.#target - this.#length);
      pending.set(off === 0 && n === pcm.length ? pcm : pcm.subarray(off, off + n), this.#length);
      this.#length += n;
      off += n;
      if (this.#length === this.#target) this.flush();
    }
    if (this.#length === 0) return;
    if (this.#restAge < 0) this.#restAge = 0;
    if (!this.#registered) {
      this.#registered = true;
      this.#o.flusher.hold(this);
    }
  }

  /** Sends what is buffered now, whatever its length: the buffer itself goes out (a view of it when short). */
  flush(): void {
    this.#restAge = -1;
    if (this.#length === 0) return;
    const pending = this.#pending!;
    const message = this.#length === pending.length ? pending : pending.subarray(0, this.#length);
    this.#pending = undefined;
    this.#length = 0;
    this.#target = this.#o.sendSamples;
    this.#o.send(message);
  }

  /** @internal StaleFlusher: sends a rest that waited a whole period; leaves the flusher when none is left waiting. */
  tickStale(): boolean {
    if (this.#restAge === 0 && this.#length > 0) {
      this.#restAge = 1;
      return true;
    }
    // A rest that waited a period goes now (one too short to send waits for more audio, unregistered).
    if (this.#restAge === 1 && this.#length >= this.#o.minSamples) this.flush();
    this.#restAge = -1;
    this.#registered = false;
    return false;
  }

  /** Leaves the flusher for good (the stream failed or closed). */
  stop(): void {
    this.#restAge = -1;
    if (!this.#registered) return;
    this.#registered = false;
    this.#o.flusher.release(this);
  }
}
