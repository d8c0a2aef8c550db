// Audio bytes deliveries of one session to one endpoint: the session's PCM cut into windows of the endpoint's
// `seconds`, one POST per window. A slow endpoint loses its oldest windows, never the session's memory or time: at
// most one window fills, one is on the wire and AUDIO_WINDOWS_QUEUED_MAX wait.
import { endianness } from 'node:os';
import { OUTPUT_SAMPLE_RATE_HZ } from '../../workers/messages.js';
import { liveAttempt, newWebhookId, reportDropped, withQuery, type LiveContext, type LiveTarget } from './live-send.js';

/** Whole windows waiting while a request is on the wire; a further one drops the oldest (counted). */
export const AUDIO_WINDOWS_QUEUED_MAX = 2;

/** The rate of every PCM sample the service decodes, and so of the audio sent. */
export const AUDIO_BYTES_SAMPLE_RATE = OUTPUT_SAMPLE_RATE_HZ;

const BIG_ENDIAN = endianness() === 'BE';

export class AudioSender {
  readonly #ctx: LiveContext;
  readonly target: LiveTarget;
  readonly #windowSamples: number;
  /** The window being filled, allocated at its first sample. */
  #window: Int16Array | undefined;
  #fill = 0;
  #queue: Buffer[] = [];
  #busy = false;
  #retired = false;

  constructor(ctx: LiveContext, target: LiveTarget) {
    this.#ctx = ctx;
    this.target = target;
    this.#windowSamples = (target.endpoint.seconds ?? 5) * AUDIO_BYTES_SAMPLE_RATE;
  }

  /** Bytes this endpoint holds for the session now (the window filling and those waiting). */
  get heldBytes(): number {
    return (this.#window?.byteLength ?? 0) + this.#queue.reduce((n, b) => n + b.length, 0);
  }

  /** Channel 0's PCM (a view valid only during the call: copied into the window). */
  write(pcm: Int16Array): void {
    if (this.#retired) return;
    let at = 0;
    while (at < pcm.length) {
      this.#window ??= new Int16Array(this.#windowSamples);
      const n = Math.min(pcm.length - at, this.#windowSamples - this.#fill);
      this.#window.set(pcm.subarray(at, at + n), this.#fill);
      this.#fill += n;
      at += n;
      if (this.#fill === this.#windowSamples) this.#seal();
    }
  }

  /** The session ended: its last, partial window goes too. */
  end(): void {
    if (this.#fill > 0 && !this.#retired) this.#seal();
  }

  /** The endpoint left the user's settings: nothing more is sent (a request on the wire finishes). */
  retire(): void {
    this.#retired = true;
    this.#window = undefined;
    this.#queue = [];
  }

  #seal(): void {
    const w = this.#window!.subarray(0, this.#fill);
    this.#window = undefined;
    this.#fill = 0;
    const bytes = Buffer.from(w.buffer, w.byteOffset, w.byteLength);
    if (BIG_ENDIAN) bytes.swap16();
    if (this.#queue.length >= AUDIO_WINDOWS_QUEUED_MAX) {
      this.#queue.shift();
      this.#ctx.metrics.audioWindowsDropped.inc();
    }
    this.#queue.push(bytes);
    if (!this.#busy) void this.#run();
  }

  async #run(): Promise<void> {
    this.#busy = true;
    const ctx = this.#ctx;
    const { endpoint, uid } = this.target;
    const url = withQuery(endpoint.url, { sample_rate: String(AUDIO_BYTES_SAMPLE_RATE), uid });
    try {
      for (let body = this.#queue.shift(); body !== undefined && !this.#retired; body = this.#queue.shift()) {
        // One attempt per window: the next window is already on its way, and a late one is worth less than it.
        const webhookId = newWebhookId();
        const r = await liveAttempt(ctx, 'audio_bytes', url, webhookId, body, this.target.secrets, 'application/octet-stream');
        if (r.outcome !== 'delivered') reportDropped(ctx, 'audio_bytes', this.target, webhookId, 1, r, body.length);
      }
    } catch (err) {
      ctx.logger.error({ sessionId: this.target.sessionId, err: { name: (err as Error)?.name } }, 'audio bytes delivery failed');
    } finally {
      this.#busy = false;
    }
  }
}
