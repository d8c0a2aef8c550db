// The socket under a remote provider's stream: a `ws` client on this thread, or one held by the codec shard that
// decodes the session (STT_SOCKETS=codec, engine/codec/pool.ts ShardUplink), where the session's PCM goes onto it without
// coming back to this thread. The stream's protocol logic (keep-alives, Finalize, acknowledgements, failure) is the
// same over both.
import type WebSocket from 'ws';
import type { UplinkHandlers } from '../../codec/pool.js';

/** Text, close and 'stuck' (more audio waits on a shard's socket than the stream allows; a local one is read from bufferedAmount). */
export type ProviderSocketHandlers = UplinkHandlers;

export interface ProviderSocket {
  /**
   * True when the session's PCM goes onto the socket from its codec shard: the stream then learns what went out from
   * taken() and sends only what still reaches this thread (the decoders' tail) through sendAudio().
   */
  readonly inShard: boolean;
  /** Bytes queued on a local socket; 0 for a shard's (it reports 'stuck' itself). */
  readonly bufferedAmount: number;
  listen(h: ProviderSocketHandlers): void;
  /** One audio message (a local socket copies it while masking: the array is the caller's again on return). */
  sendAudio(pcm: Int16Array): void;
  /** A text message; `flush` first sends audio a shard still holds back (it holds only a rest under 20 ms). */
  sendText(text: string, flush: boolean): void;
  /** Frees the socket at once, without a close frame; no handler is called afterwards. */
  terminate(): void;
  /** Ends the socket with a close frame of `code` when it is open (else at once); no handler is called afterwards. */
  close(code: number): void;
}

/** A `ws` client socket on this thread, already open. */
export class LocalSocket implements ProviderSocket {
  readonly inShard = false;
  readonly #ws: WebSocket;

  constructor(ws: WebSocket, onError: (err: Error) => void) {
    this.#ws = ws;
    ws.on('error', onError);
  }

  get bufferedAmount(): number {
    return this.#ws.bufferedAmount;
  }

  listen(h: ProviderSocketHandlers): void {
    this.#ws.on('message', (data, isBinary) => {
      if (!isBinary) h.text(data.toString());
    });
    this.#ws.on('close', (code, reason) => h.close(code, reason.toString()));
  }

  sendAudio(pcm: Int16Array): void {
    this.#ws.send(Buffer.from(pcm.buffer, pcm.byteOffset, pcm.byteLength));
  }

  sendText(text: string): void {
    this.#ws.send(text);
  }

  terminate(): void {
    this.#ws.removeAllListeners('close');
    this.#ws.terminate();
  }

  close(code: number): void {
    this.#ws.removeAllListeners('close');
    if (this.#ws.readyState === this.#ws.OPEN) this.#ws.close(code);
    else this.#ws.terminate();
  }
}
