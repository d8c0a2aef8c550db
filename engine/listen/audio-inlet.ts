// A session's inbound audio: held until the session is READY, bounded in bytes, then handed to its codec stream.
import type { CodecStream, PcmInfo } from '../codec/stream.js';

export interface AudioInletOptions {
  codec: CodecStream;
  /** Bytes received but not yet decoded (held here plus in the codec stream) before accept() refuses. */
  maxBytes: number;
  /** 16 kHz mono PCM per channel, in order. */
  onPcm: (pcm: Int16Array[], info: PcmInfo) => void;
  /** PCM of a channel the codec shard sent on a provider socket it holds (CodecStream 'uplinked'), in order with onPcm. */
  onUplinked?: (channel: number, samples: number) => void;
}

export class AudioInlet {
  /** Kept on the inlet itself, not in an options object: one object fewer for each frame to fetch. */
  readonly #codec: CodecStream;
  readonly #maxBytes: number;
  /** Audio accepted before start(): copies, since the caller's buffer is only lent. */
  #held: Uint8Array[] = [];
  #heldBytes = 0;
  #flowing = false;
  #finished = false;

  constructor(opts: AudioInletOptions) {
    this.#codec = opts.codec;
    this.#maxBytes = opts.maxBytes;
    opts.codec.on('pcm', opts.onPcm);
    if (opts.onUplinked) opts.codec.on('uplinked', opts.onUplinked);
  }

  /** The session's codec stream (its speech side opens provider sockets in its shard: SessionSttOptions.codec). */
  get codec(): CodecStream {
    return this.#codec;
  }

  /** Bytes received and not yet decoded. */
  get pendingBytes(): number {
    return this.#heldBytes + this.#codec.pendingBytes;
  }

  /**
   * Takes one audio message (its bytes are copied before this returns); false (and nothing kept) when the bound would
   * be passed: the codec falls behind, a slow consumer is detected rather than buffered without end.
   */
  accept(message: Uint8Array): boolean {
    if (this.#finished) return true;
    if (this.pendingBytes + message.byteLength > this.#maxBytes) return false;
    if (this.#flowing) {
      this.#codec.push(message);
    } else {
      this.#held.push(message.slice());
      this.#heldBytes += message.byteLength;
    }
    return true;
  }

  /** Starts decoding (the session is READY); audio accepted before goes first. */
  start(): void {
    if (this.#flowing || this.#finished) return;
    this.#flowing = true;
    for (const m of this.#held) this.#codec.push(m);
    this.#held = [];
    this.#heldBytes = 0;
  }

  /** Decodes everything accepted, emits the decoders' tail, and resolves when the last PCM was delivered. */
  async finish(): Promise<void> {
    if (this.#finished) return;
    this.start();
    this.#finished = true;
    await this.#codec.close({ flush: true });
  }

  /** Drops held audio and frees the decoders. */
  dispose(): void {
    this.#finished = true;
    this.#held = [];
    this.#heldBytes = 0;
    this.#codec.removeAllListeners('pcm');
    this.#codec.removeAllListeners('uplinked');
    void this.#codec.close({ flush: false }).catch(() => undefined);
  }
}
