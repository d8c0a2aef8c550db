// A remote speech provider's socket, held by the codec shard that decodes the session: decoded PCM goes onto it from
// the thread that decoded it, and only the provider's text and the socket's events cross back (engine/codec/uplink.ts).
import { WsClient } from './ws-client.js';
import type { OkAnswer, UplinkEvent, UplinkOpenAnswer, UplinkOptions, UplinkTask } from './messages.js';

/** What one socket tells its owner: its text answers, its close, and that more than `maxBufferedBytes` waits on it. */
export type SocketEvent = { kind: 'text'; text: string } | { kind: 'close'; code: number; reason: string } | { kind: 'stuck' };

/**
 * One channel's provider socket in this thread: each decoded batch goes out as one message (a batch shorter than
 * `minSamples`, a rest after a pause, waits here for the next); text and close are told to `emit`. Here rather than on
 * another thread, a provider message does not cross threads twice more, and its answers do not wait behind whatever
 * that thread is doing. A batch is a message because the codec stream holds its frames back until they complete the
 * provider's next one (its send plan, engine/codec/uplink.ts).
 */
export class Uplink {
  readonly #ws: WsClient;
  readonly #minSamples: number;
  readonly #maxBufferedBytes: number;
  readonly #emit: (e: SocketEvent) => void;
  #state: 'connecting' | 'open' | 'down' = 'connecting';
  #carry: Int16Array | undefined;
  #stuck = false;

  constructor(o: UplinkOptions, emit: (e: SocketEvent) => void, opened: (answer: UplinkOpenAnswer) => void) {
    this.#minSamples = o.minSamples;
    this.#maxBufferedBytes = o.maxBufferedBytes;
    this.#emit = emit;
    const ws = new WsClient(o, (a) => {
      this.#state = a.ok ? 'open' : 'down';
      // Before any audio: the shard sends a batch's PCM as soon as the socket is open.
      if (a.ok && o.firstText !== undefined) ws.sendText(o.firstText);
      opened(a);
    });
    this.#ws = ws;
    ws.listen({
      text: (text) => {
        if (this.#state === 'open') emit({ kind: 'text', text });
      },
      close: (code, reason) => {
        const was = this.#state;
        this.#state = 'down';
        if (was === 'open') emit({ kind: 'close', code, reason });
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

  /** Sends a rest left waiting, whatever its length (before a provider's finalize or end of audio). */
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
      this.#emit({ kind: 'stuck' });
    }
  }
}

/** The uplinks of one thread, by stream key and channel, and the answers to their tasks. */
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

  /** Answers one socket task: an open resolves once the handshake went one way or the other. */
  handle(task: UplinkTask): Promise<UplinkOpenAnswer> | OkAnswer {
    switch (task.type) {
      case 'uplinkOpen':
        return this.#open(task.key, task.channel, task);
      case 'uplinkText':
        this.get(task.key, task.channel)?.sendText(task.text, task.flush);
        break;
      case 'uplinkPcm':
        this.get(task.key, task.channel)?.take([task.pcm]);
        break;
      case 'uplinkClose':
        this.#close(task.key, task.channel, task.code);
        break;
    }
    return { ok: true };
  }

  #open(key: number, channel: number, o: UplinkOptions): Promise<UplinkOpenAnswer> {
    this.#close(key, channel);
    return new Promise((resolve) => {
      let u: Uplink | undefined;
      let refused = false;
      u = new Uplink(
        o,
        (e) => {
          // A socket that closed is gone: the stream's PCM is answered with again from now on.
          if (e.kind === 'close' && this.get(key, channel) === u) this.#remove(key, channel);
          for (const l of this.#listeners) l({ key, channel, ...e });
        },
        (a) => {
          // Possibly from inside the constructor (a header it refuses to send): then `u` is not listed yet.
          refused = !a.ok;
          if (refused && u !== undefined && this.get(key, channel) === u) this.#remove(key, channel);
          resolve(a);
        },
      );
      if (refused) return;
      const list = this.#byKey.get(key) ?? [];
      list[channel] = u;
      this.#byKey.set(key, list);
    });
  }

  #close(key: number, channel: number, code?: number): void {
    const u = this.get(key, channel);
    if (u === undefined) return;
    u.terminate(code);
    this.#remove(key, channel);
  }

  #remove(key: number, channel: number): void {
    const list = this.#byKey.get(key);
    if (list === undefined) return;
    delete list[channel];
    if (!list.some(Boolean)) this.#byKey.delete(key);
  }
}
