// A session's inbound audio: a byte-bounded queue in front of its codec stream, at most one decode batch in flight, PCM out.
import type { CodecStream, PcmInfo } from '../pool.js';

/** Messages handed to the codec at once: below CodecPool's maxBatchMessages, so one push is one decode task. */
const MAX_DECODE_BATCH = 500;

export interface AudioInletOptions {
  codec: CodecStream;
  /** Bytes received but not yet decoded (queued plus in the codec) before accept() refuses. */
  maxBytes: number;
  /** 16 kHz mono PCM per channel, in order. */
  onPcm: (pcm: Int16Array[], info: PcmInfo) => void;
}

export class AudioInlet {
  readonly #o: AudioInletOptions;
  #queue: Uint8Array[] = [];
  #queuedBytes = 0;
  /** Bytes handed to the codec whose PCM has not come back. */
  #decodingBytes = 0;
  #flowing = false;
  #finished = false;

  constructor(opts: AudioInletOptions) {
    this.#o = opts;
    opts.codec.on('pcm', (pcm, info) => {
      this.#o.onPcm(pcm, info);
      this.#decoded();
    });
    opts.codec.on('failure', () => this.#decoded());
  }

  /** Bytes received and not yet decoded. */
  get pendingBytes(): number {
    return this.#queuedBytes + this.#decodingBytes;
  }

  /** Takes one audio message; false (and nothing queued) when the bound would be passed. */
  accept(message: Uint8Array): boolean {
    if (this.#finished) return true;
    if (this.pendingBytes + message.byteLength > this.#o.maxBytes) return false;
    this.#queue.push(message);
    this.#queuedBytes += message.byteLength;
    this.#pump();
    return true;
  }

  /** Starts decoding (the session is READY); audio accepted before waits until now. */
  start(): void {
    this.#flowing = true;
    this.#pump();
  }

  /** Decodes everything accepted, emits the decoders' tail, and resolves when the last PCM was delivered. */
  async finish(): Promise<void> {
    if (this.#finished) return;
    this.#finished = true;
    for (const m of this.#queue) this.#o.codec.push(m);
    this.#queue = [];
    this.#queuedBytes = 0;
    await this.#o.codec.close({ flush: true });
  }

  /** Drops queued audio and frees the decoders. */
  dispose(): void {
    this.#finished = true;
    this.#queue = [];
    this.#queuedBytes = this.#decodingBytes = 0;
    this.#o.codec.removeAllListeners('pcm');
    void this.#o.codec.close({ flush: false }).catch(() => undefined);
  }

  #pump(): void {
    if (!this.#flowing || this.#finished || this.#decodingBytes > 0 || this.#queue.length === 0) return;
    const batch = this.#queue.length <= MAX_DECODE_BATCH ? this.#queue : this.#queue.slice(0, MAX_DECODE_BATCH);
    this.#queue = this.#queue.length <= MAX_DECODE_BATCH ? [] : this.#queue.slice(MAX_DECODE_BATCH);
    for (const m of batch) {
      this.#queuedBytes -= m.byteLength;
      this.#decodingBytes += m.byteLength;
      this.#o.codec.push(m);
    }
  }

  #decoded(): void {
    this.#decodingBytes = 0;
    this.#pump();
  }
}
