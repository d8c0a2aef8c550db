// The main thread's handle on a remote provider's socket, which lives in the codec shard that decodes the session
// (workers/uplink.ts): the session's PCM goes onto it there, and its text and close come back here to the provider stream.
import type { CodecAnswer, FailAnswer, UplinkEvent, UplinkOpenAnswer, UplinkOptions, UplinkTask } from '../../workers/messages.js';
import { Uplinks } from '../../workers/uplink.js';

/**
 * How a remote stream sends its channel's audio, handed over with its socket's opening (ProviderSocket.open()). The
 * codec stream then holds the session's frames back until they decode to the stream's next message (`firstSamples`
 * until the socket has taken any audio, then `messageSamples`, or the pool's maxHoldMs), and the shard sends each
 * decoded batch as one message, a batch shorter than `minSamples` waiting there for more.
 */
export interface SendPlan {
  /** 16 kHz samples per provider message. */
  readonly messageSamples: number;
  /** Samples of the stream's first message: drawn per stream, so streams that start together do not send together. */
  readonly firstSamples: number;
  /** The shortest message the provider takes; a shorter batch waits in the shard for the next (or a flush). */
  readonly minSamples: number;
}

/** Where and how to connect (the socket's send plan is given beside it). */
export type SocketSpec = Omit<UplinkOptions, 'minSamples'>;

/** What a provider socket tells its owner, the provider stream. */
export interface SocketHandlers {
  text(text: string): void;
  /** The socket closed (by the provider, the network, or a codec thread that exited: code 1006); nothing follows. */
  close(code: number, reason: string): void;
  /** More than `maxBufferedBytes` waits on the socket. */
  stuck(): void;
}

/** Where a socket lives, as its handle sees it. */
export interface SocketHome {
  /** Runs one task of the socket on the thread that holds it, in order with the shard's decode tasks. */
  run(task: UplinkTask, transferList?: ArrayBuffer[]): Promise<CodecAnswer>;
  /** The socket opened: its plan now applies. */
  opened(socket: ProviderSocket): void;
  /** The socket is gone (freed, closed or lost); no event reaches it any more. */
  gone(socket: ProviderSocket): void;
}

/**
 * One channel's provider socket, for the provider stream that runs over it. Tasks reach the socket's thread in order,
 * so text sent after the 'pcm' or 'uplinked' event of a batch goes out after that batch's audio.
 */
export class ProviderSocket {
  readonly key: number;
  readonly channel: number;
  readonly #home: SocketHome;
  #plan: SendPlan | undefined;
  #handlers: SocketHandlers | undefined;
  /** Events that came before listen(): the provider may speak in the same read as the upgrade's answer. */
  #early: ((h: SocketHandlers) => void)[] = [];
  #closed = false;

  constructor(key: number, channel: number, home: SocketHome) {
    this.key = key;
    this.channel = channel;
    this.#home = home;
  }

  /** The send plan it was opened with, once it is open (undefined before, and once it is gone). */
  get plan(): SendPlan | undefined {
    return this.#closed ? undefined : this.#plan;
  }

  /** Opens the socket; resolves with how the handshake went (a refusal's status and Retry-After). */
  async open(spec: SocketSpec, plan: SendPlan): Promise<UplinkOpenAnswer> {
    const task: UplinkTask = { type: 'uplinkOpen', key: this.key, channel: this.channel, ...spec, minSamples: plan.minSamples };
    const answer = (await this.#home.run(task)) as UplinkOpenAnswer | FailAnswer;
    if ('code' in answer) return { ok: false, why: answer.message };
    if (answer.ok && !this.#closed) {
      this.#plan = plan;
      this.#home.opened(this);
    }
    return answer;
  }

  /** Who hears the socket's text, close and 'stuck' (what came before is told now). */
  listen(handlers: SocketHandlers): void {
    if (this.#closed && this.#early.length === 0) return;
    this.#handlers = handlers;
    for (const f of this.#early.splice(0)) f(handlers);
  }

  /** A text message; `flush` first sends a rest of PCM still waiting where the socket lives. */
  sendText(text: string, flush: boolean): void {
    if (!this.#closed) this.#run({ type: 'uplinkText', key: this.key, channel: this.channel, text, flush });
  }

  /** PCM that reached this thread (copied: the caller's array may be a view into a shard's answer). */
  sendAudio(pcm: Int16Array): void {
    if (this.#closed || pcm.length === 0) return;
    const copy = pcm.slice();
    this.#run({ type: 'uplinkPcm', key: this.key, channel: this.channel, pcm: copy }, [copy.buffer]);
  }

  /** Frees the socket at once; no handler is called afterwards. */
  terminate(): void {
    this.#end(undefined);
  }

  /** Ends the socket with a close frame of `code` (at once if it is not open); no handler is called afterwards. */
  close(code: number): void {
    this.#end(code);
  }

  /** @internal an event of the socket, from the thread that holds it. */
  event(e: UplinkEvent): void {
    if (this.#closed) return;
    if (e.kind === 'text') this.#tell((h) => h.text(e.text));
    else if (e.kind === 'stuck') this.#tell((h) => h.stuck());
    else this.lost(e.code, e.reason);
  }

  /** @internal the socket is gone where it lived (closed there, or its thread exited). */
  lost(code: number, reason: string): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#home.gone(this);
    this.#tell((h) => h.close(code, reason));
    this.#handlers = undefined;
  }

  #end(code: number | undefined): void {
    this.#handlers = undefined;
    this.#early = [];
    if (this.#closed) return;
    this.#closed = true;
    this.#home.gone(this);
    this.#run({ type: 'uplinkClose', key: this.key, channel: this.channel, ...(code !== undefined ? { code } : {}) });
  }

  #run(task: UplinkTask, transferList?: ArrayBuffer[]): void {
    void this.#home.run(task, transferList).catch(() => undefined);
  }

  #tell(f: (h: SocketHandlers) => void): void {
    if (this.#handlers) f(this.#handlers);
    else this.#early.push(f);
  }
}

/** Sockets of streams no codec shard decodes (the kept-audio job's, tests'): the shard's own code, on this thread. */
const here = new Uplinks();
const hereSockets = new Map<number, ProviderSocket>();
let hereKeys = 0;
here.listen((e) => hereSockets.get(e.key)?.event(e));

/** A provider socket on this thread, for a stream whose audio is written to it rather than decoded by a shard. */
export function socketHere(): ProviderSocket {
  const key = ++hereKeys;
  const socket = new ProviderSocket(key, 0, {
    run: async (task) => here.handle(task),
    opened: () => undefined,
    gone: (s) => void hereSockets.delete(s.key),
  });
  hereSockets.set(key, socket);
  return socket;
}
