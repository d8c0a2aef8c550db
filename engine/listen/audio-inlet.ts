// A session's inbound audio: held until the session is READY, bounded in bytes, then handed to its codec stream.
import type { CodecStream, PcmInfo, ShardUplink } from '../codec/pool.js';

export interface AudioInletOptions {
  codec: CodecStream;
  /** Bytes received but not yet decoded (held here plus in the codec stream) before accept() refuses. */
  maxBytes: number;
  /** 16 kHz mono PCM per channel, in order. */
  onPcm: (pcm: Int16Array[], info: PcmInfo) => void;
  /** PCM of a channel the codec shard sent on a provider socket it holds (CodecStream 'uplinked'), in order with onPcm. */
  onUplinked?: (channel: number, samples: number) => void;
  /**
   * Each message as it leaves for the decoder, in order (lent for the call: copy what is kept): a few at a time, as the
   * codec stream puts a task together (CodecStream.onSend), not as they arrive.
   */
  onDecode?: (message: Uint8Array) => void;
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
    opts.codec.onSend = opts.onDecode;
    if (opts.onUplinked) opts.codec.on('uplinked', opts.onUplinked);
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

  /** A provider socket for `channel` in the codec stream's shard, when the pool allows it (CodecStream.uplink()). */
  uplink(channel: number): ShardUplink | undefined {
    return this.#codec.uplink(channel);
  }

  /** Lets the decoder gather audio until it decodes to `samples` samples (CodecStream.holdUntil()). */
  holdUntil(samples: number): void {
    if (!this.#finished) this.#codec.holdUntil(samples);
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
    this.#codec.onSend = undefined;
    void this.#codec.close({ flush: false }).catch(() => undefined);
  }
}
