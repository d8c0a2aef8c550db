// A session's outbound side: sends while the socket takes them, queues behind backpressure, gives up on a client that never reads.

export type SendResult = 'ok' | 'backpressure' | 'dropped';

/** What the transport gives an actor: it never sees the WebSocket itself. */
export interface SessionSocket {
  /** Sends one frame (string → text, bytes → binary). 'backpressure': sent but buffered, wait for onDrain(). */
  send(data: string | Uint8Array): SendResult;
  /** Closes with `code` and a reason of at most 123 bytes. */
  end(code: number, reason: string): void;
}

export class Outbox {
  readonly #socket: SessionSocket;
  readonly #maxBytes: number;
  readonly #onOverflow: () => void;
  #queue: string[] = [];
  #bytes = 0;
  #blocked = false;
  #open = true;

  /**
   * @param maxBytes characters queued behind backpressure before `onOverflow` (the client is not reading).
   * @param onOverflow called once when the queue overflows or the socket drops a message.
   */
  constructor(socket: SessionSocket, maxBytes: number, onOverflow: () => void) {
    this.#socket = socket;
    this.#maxBytes = maxBytes;
    this.#onOverflow = onOverflow;
  }

  get open(): boolean {
    return this.#open;
  }

  get blocked(): boolean {
    return this.#blocked;
  }

  /** Characters waiting for the socket to drain. */
  get queuedBytes(): number {
    return this.#bytes;
  }

  /** Sends now or after the next drain, in order. */
  send(data: string): void {
    if (!this.#open) return;
    if (!this.#blocked) {
      this.#write(data);
      return;
    }
    this.#queue.push(data);
    this.#bytes += data.length;
    if (this.#bytes > this.#maxBytes) this.#overflow();
  }

  /** Sends only if nothing is waiting (heartbeats: a late ping is worthless). */
  sendIfIdle(data: string): void {
    if (this.#open && !this.#blocked) this.#write(data);
  }

  /** The socket drained: send what waited until it blocks again. */
  drain(): void {
    this.#blocked = false;
    while (this.#queue.length > 0 && !this.#blocked && this.#open) {
      const next = this.#queue.shift()!;
      this.#bytes -= next.length;
      this.#write(next);
    }
  }

  /** Ends the socket (once) and drops the queue. */
  end(code: number, reason: string): void {
    if (this.#open) this.#socket.end(code, reason);
    this.close();
  }

  /** Stops sending without ending the socket (the client already went away). */
  close(): void {
    this.#open = false;
    this.#queue = [];
    this.#bytes = 0;
  }

  #write(data: string): void {
    const r = this.#socket.send(data);
    if (r === 'backpressure') this.#blocked = true;
    else if (r === 'dropped') this.#overflow();
  }

  #overflow(): void {
    if (!this.#open) return;
    this.#onOverflow();
  }
}
