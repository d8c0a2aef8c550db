// A remote speech provider's socket held by the codec shard that decodes the session (STT_SOCKETS=codec): decoded PCM
// goes onto it from the thread that decoded it, and only the provider's text answers and socket events cross to the
// main thread, where the stream's protocol logic stays (engine/codec/pool.ts ShardUplink is that side).
//
// Rationale: with the socket on the main thread every provider message crossed three threads (main → shard → main →
// socket), and the answer waited behind whatever the busy main thread was doing. Measured at 650 streaming sessions
// (fleet bench, 2 vCPUs, runs in turn): frame p99 41 and 34 ms against 142 and 116, 8% less CPU. The shard sends each
// decoded batch as one message: the session already holds its frames back until they complete the provider's next
// message (engine/codec/pool.ts CodecStream.holdUntil()); a batch shorter than `minSamples` (a rest after a pause) waits for
// more.
import { WsClient } from './ws-client.js';
import type { UplinkEvent, UplinkOpenAnswer, UplinkOpenTask } from './messages.js';

/**
 * One channel's provider socket in this thread: each decoded batch goes out as one message (a batch shorter than
 * `minSamples` waits here for the next); text and close go to the main thread as events.
 */
export class Uplink {
  readonly key: number;
  readonly channel: number;
  readonly #ws: WsClient;
  readonly #minSamples: number;
  readonly #maxBufferedBytes: number;
  readonly #emit: (e: UplinkEvent) => void;
  #state: 'connecting' | 'open' | 'down' = 'connecting';
  #carry: Int16Array | undefined;
  #stuck = false;

  constructor(task: UplinkOpenTask, emit: (e: UplinkEvent) => void, opened: (answer: UplinkOpenAnswer) => void) {
    this.key = task.key;
    this.channel = task.channel;
    this.#minSamples = task.minSamples;
    this.#maxBufferedBytes = task.maxBufferedBytes;
    this.#emit = emit;
    const ws = new WsClient(task, (a) => {
      this.#state = a.ok ? 'open' : 'down';
      // Before any audio: the shard sends a batch's PCM as soon as the socket is open.
      if (a.ok && task.firstText !== undefined) ws.sendText(task.firstText);
      opened(a);
    });
    this.#ws = ws;
    ws.listen({
      text: (text) => {
        if (this.#state === 'open') emit({ key: this.key, channel: this.channel, kind: 'text', text });
      },
      close: (code, reason) => {
        const was = this.#state;
        this.#state = 'down';
        if (was === 'open') emit({ key: this.key, channel: this.channel, kind: 'close', code, reason });
      },
    });
  }

  /**
   * Sends one decoded batch (its chunks as one message, with a rest left from before in front); answers the samples
   * taken, 0 when the socket is not open (the caller keeps the PCM). The arrays are only read: the client copies them
   * into the frame it masks.
   */
  take(chunks: readonly Int16Array[]): number {
    if (this.#state !== 'open') return 0;
    const carried = this.#carry?.length ?? 0;
    let n = carried;
    for (const c of chunks) n += c.length;
    const taken = n - carried;
    if (taken === 0) return 0;
    if (n < this.#minSamples) {
      // Copied: the chunks are views of the thread's reused buffers.
      const rest = new Int16Array(n);
      if (this.#carry) rest.set(this.#carry);
      let at = carried;
      for (const c of chunks) {
        rest.set(c, at);
        at += c.length;
      }
      this.#carry = rest;
      return taken;
    }
    const carry = this.#carry;
    this.#carry = undefined;
    this.#send(carry === undefined ? chunks : [carry, ...chunks]);
    return taken;
  }

  /** Sends a rest left waiting, whatever its length (before Finalize or CloseStream). */
  flush(): void {
    const rest = this.#carry;
    this.#carry = undefined;
    if (rest !== undefined && this.#state === 'open') this.#send([rest]);
  }

  sendText(text: string, flush: boolean): void {
    if (flush) this.flush();
    if (this.#state === 'open') this.#ws.sendText(text);
  }

  /** Frees the socket: at once, or with a close frame of `code` when it is open; no event follows. */
  terminate(code?: number): void {
    const wasOpen = this.#state === 'open';
    this.#state = 'down';
    this.#carry = undefined;
    if (code !== undefined && wasOpen) this.#ws.close(code);
    else this.#ws.terminate();
  }

  #send(pcm: readonly Int16Array[]): void {
    this.#ws.sendBinary(pcm);
    if (!this.#stuck && this.#ws.bufferedAmount > this.#maxBufferedBytes) {
      this.#stuck = true;
      this.#emit({ key: this.key, channel: this.channel, kind: 'stuck' });
    }
  }
}

/** The uplinks of one thread, by stream key and channel. */
export class Uplinks {
  readonly #byKey = new Map<number, Uplink[]>();
  #listeners = new Set<(e: UplinkEvent) => void>();

  /** Adds a listener for every uplink's events; answers a function that removes it. */
  listen(listener: (e: UplinkEvent) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  get(key: number, channel: number): Uplink | undefined {
    return this.#byKey.get(key)?.[channel];
  }

  open(task: UplinkOpenTask): Promise<UplinkOpenAnswer> {
    this.close(task.key, task.channel);
    return new Promise((resolve) => {
      const u = new Uplink(task, (e) => {
        // A socket that closed is gone: the stream's PCM is answered with again from now on.
        if (e.kind === 'close' && this.get(task.key, task.channel) === u) this.#remove(u);
        this.#emit(e);
      }, (a) => {
        if (!a.ok && this.get(task.key, task.channel) === u) this.#remove(u);
        resolve(a);
      });
      const list = this.#byKey.get(task.key) ?? [];
      list[task.channel] = u;
      this.#byKey.set(task.key, list);
    });
  }

  close(key: number, channel: number, code?: number): void {
    const u = this.get(key, channel);
    if (u === undefined) return;
    u.terminate(code);
    this.#remove(u);
  }

  #remove(u: Uplink): void {
    const list = this.#byKey.get(u.key);
    if (list === undefined) return;
    delete list[u.channel];
    if (!list.some(Boolean)) this.#byKey.delete(u.key);
  }

  #emit(e: UplinkEvent): void {
    for (const l of this.#listeners) l(e);
  }
}
