// One session's audio through the shard it is pinned to: push() stages each message, the shard decodes it in its next
// task, 'pcm' brings the PCM back; the session's provider sockets live in the same shard (socket()).
import { EventEmitter } from 'node:events';
import { EngineError } from '../errors.js';
import { encodedDurationS } from '../audio/encoded-duration.js';
import type { EncodedTail } from '../audio/encoded-tail.js';
import { codecIndex, OUTPUT_SAMPLE_RATE_HZ, type ClipAnswer, type CodecParams, type FailAnswer, type PcmAnswer } from '../../workers/messages.js';
import type { StreamPart } from '../../workers/packing.js';
import type { Shard, ShardMember } from './shard.js';
import { Staging } from './staging.js';
import { ProviderSocket } from './uplink.js';

export interface CodecStreamOptions extends CodecParams {
  /** The session's id; one stream per session. */
  sessionId: string;
}

/** What came with one batch of PCM. */
export interface PcmInfo {
  /** Frames decoded in this batch (LC3 frames split out of messages count one each). */
  frames: number;
  /** Frames in this batch that failed to decode: skipped, concealed where the codec can. */
  corruptFrames: number;
  /** True when the shard's thread had been replaced and the decoders were re-created for this batch. */
  recreated: boolean;
  /** Always 16000: every PCM array is 16 kHz mono Int16. */
  sampleRate: number;
  /** True for the last batch, the decoders' tail at `close()`. */
  final: boolean;
}

export interface CodecStreamStats {
  /** Messages pushed. */
  messages: number;
  frames: number;
  corruptFrames: number;
  /** Messages lost with a crashed thread (their batch was in flight) or a failed decoder. */
  lostMessages: number;
  /** Samples out per channel, at 16 kHz (answered here or sent on the channel's socket). */
  samples: number[];
  /** Decode tasks this stream's audio rode in. */
  tasks: number;
  /** Times the decoders were re-created after a thread crash or decoder failure. */
  recreations: number;
}

export interface CodecStreamEvents {
  /**
   * 16 kHz mono Int16 PCM, one array per channel (index 0 = channel id 0x01). The arrays are views into one buffer
   * shared by every stream of the task, valid only while the listener runs: the buffer goes back to the thread to be
   * filled again. Read-only, never to be moved to another thread; copy what is kept beyond the call.
   */
  pcm: [pcm: Int16Array[], info: PcmInfo];
  /** A batch was lost (thread crash, decoder failure). The stream stays open; the next batch re-creates the decoders. */
  failure: [error: EngineError, lostMessages: number];
  /** After `close()` finished; no event follows. */
  close: [];
  /**
   * PCM of `channel` the shard sent on the channel's provider socket instead of answering with it (socket()), in order
   * with the 'pcm' events: `samples` 16 kHz samples.
   */
  uplinked: [channel: number, samples: number];
}

function rebuild(answer: { code: string; message: string }): EngineError {
  const code = answer.code === 'ENG_ERR_CODEC_UNSUPPORTED' || answer.code === 'ENG_ERR_CODEC_FAILED' ? answer.code : 'ENG_ERR_INTERNAL';
  return new EngineError(code, { reason: answer.message });
}

/**
 * One session's audio through its shard. Create with `CodecPool.open()`.
 *
 * What the session's speech side asks of it (engine/listen/session-stt.ts): provider sockets in the stream's shard
 * (socket(), each opened with its stream's send plan, which sets how long audio is held back for it), and the encoded
 * audio kept per channel until the provider answers for it (keepEncoded()).
 */
export class CodecStream extends EventEmitter<CodecStreamEvents> implements ShardMember {
  readonly sessionId: string;
  readonly params: Readonly<CodecParams>;
  readonly stats: CodecStreamStats;
  /** Resolves once the shard created the decoders; rejects with an EngineError if it could not. */
  readonly ready: Promise<void>;
  /** @internal the stream as its shard sees it. */
  readonly staging: Staging;
  readonly #shard: Shard;
  #idleWaiters: (() => void)[] = [];
  #state: 'open' | 'closing' | 'closed' = 'open';
  /** Provider sockets in the shard, by channel (socket()). */
  #sockets: (ProviderSocket | undefined)[] = [];
  /** Per channel: its socket has taken audio since it opened (the hold is a whole message from then on). */
  #started: boolean[] = [];

  /** Built by CodecPool.open(): `key` is unique in the process. */
  constructor(shard: Shard, key: number, options: CodecStreamOptions) {
    super();
    this.#shard = shard;
    this.sessionId = options.sessionId;
    this.params = Object.freeze({ codec: options.codec, sampleRate: options.sampleRate, channels: options.channels });
    this.staging = new Staging(key, codecIndex(options.codec), options.sampleRate, options.channels);
    this.stats = { messages: 0, frames: 0, corruptFrames: 0, lostMessages: 0, samples: new Array<number>(options.channels).fill(0), tasks: 0, recreations: 0 };
    shard.add(this);
    // Tasks reach the thread in order, so audio staged now is decoded after the decoders exist (a failed open still
    // lets it go: the thread re-creates the decoders or answers with the failure).
    this.ready = shard.run({ type: 'open', key, ...this.params }).then((a) => {
      if (!a.ok) throw rebuild(a as FailAnswer);
    });
  }

  /** Shard (thread) index the session is pinned to; the shard on the main thread comes after the threads. */
  get shard(): number {
    return this.#shard.index;
  }

  /** True when the session's audio is decoded on the main thread (CodecPoolOptions.inline). */
  get inline(): boolean {
    return this.#shard.inline;
  }

  /** Bytes pushed whose PCM has not come back (staged or being decoded). */
  get pendingBytes(): number {
    return this.staging.pendingBytes;
  }

  /**
   * A provider socket for `channel` in this stream's shard (a channel's earlier one is freed). Once it is open, the
   * channel's PCM goes onto it from the shard and comes back here only as 'uplinked' counts (as 'pcm' again once the
   * socket is gone), and the stream holds its audio back as the socket's send plan asks.
   */
  socket(channel: number): ProviderSocket {
    this.#sockets[channel]?.terminate();
    const shard = this.#shard;
    const socket = new ProviderSocket(this.staging.key, channel, {
      run: (task, transferList) => shard.run(task, transferList),
      opened: (s) => {
        if (this.#sockets[s.channel] !== s) return;
        this.#started[s.channel] = false;
        this.#fitHold();
      },
      gone: (s) => {
        shard.socketGone(s);
        if (this.#sockets[s.channel] !== s) return;
        this.#sockets[s.channel] = undefined;
        this.#fitHold();
      },
    });
    this.#sockets[channel] = socket;
    shard.holdSocket(socket);
    return socket;
  }

  /**
   * Keeps the last `seconds` of this (mono) stream's decoded PCM in its shard from now on, for clip(); 0 lets it go.
   * The PCM stays in the shard: only the clips asked for cross to this thread.
   */
  async window(seconds: number): Promise<void> {
    if (this.#state !== 'open') return;
    await this.ready;
    await this.#shard.run({ type: 'window', key: this.staging.key, samples: Math.round(seconds * OUTPUT_SAMPLE_RATE_HZ) });
  }

  /**
   * The window's PCM of the stream ranges [from, to) in seconds since the session's first audio (pairs), concatenated;
   * what fell out of the window (or was never kept) is left out, so the clip may be shorter or empty.
   */
  async clip(ranges: readonly number[]): Promise<Int16Array> {
    if (this.#state === 'closed') return new Int16Array(0);
    const answer = await this.#shard.run({ type: 'clip', key: this.staging.key, ranges: ranges.map((s) => Math.round(s * OUTPUT_SAMPLE_RATE_HZ)) });
    return answer.ok && 'clip' in answer ? (answer as ClipAnswer).clip : new Int16Array(0);
  }

  /**
   * Copies each message, as it leaves for the decoder, into its channel's tail (two channels: by its channel-id byte,
   * taken off; a message of neither channel is not kept), with the seconds it holds; undefined stops.
   */
  keepEncoded(tails: readonly EncodedTail[] | undefined): void {
    if (tails === undefined) {
      this.staging.keep = undefined;
      return;
    }
    const { codec, sampleRate, channels } = this.params;
    this.staging.keep = (message) => {
      let ch = 0;
      let payload = message;
      if (channels === 2) {
        const id = message[0];
        if (id !== 0x01 && id !== 0x02) return;
        ch = id - 1;
        payload = message.subarray(1);
      }
      tails[ch]?.push(payload, encodedDurationS(codec, sampleRate, 1, payload));
    };
  }

  /**
   * Queues one WebSocket message (for two channels: channel-id byte first). Its bytes are copied at once, so the
   * caller's buffer is free when this returns. While the stream holds audio back it reads the seconds the message
   * holds from its bytes. Keep-alive messages (2 bytes or fewer) are the session layer's to drop.
   */
  push(message: Uint8Array): void {
    if (this.#state !== 'open') throw new EngineError('ENG_ERR_CODEC_STREAM_CLOSED', { sessionId: this.sessionId });
    this.stats.messages++;
    const p = this.params;
    // Two channels' time is the first channel's (encodedDurationS counts only its messages).
    this.#shard.stage(this, message, this.staging.hold > 0 ? encodedDurationS(p.codec, p.sampleRate, p.channels, message) * OUTPUT_SAMPLE_RATE_HZ : 0);
  }

  /**
   * Ends the stream. With `flush` (default) the queued messages are decoded and the decoders' tail is emitted as a
   * final 'pcm'; without it queued audio is dropped and the decoders are freed at once. Emits 'close' and resolves.
   * The stream's sockets stay until their provider streams end them.
   */
  async close(options: { flush?: boolean } = {}): Promise<void> {
    const flush = options.flush ?? true;
    if (this.#state === 'closed') return;
    if (this.#state === 'closing') {
      await new Promise<void>((resolve) => this.once('close', resolve));
      return;
    }
    this.#state = 'closing';
    if (!flush) this.#shard.unstage(this);
    this.#fitHold();
    await this.ready.catch(() => undefined);
    if (!this.staging.idle) await new Promise<void>((resolve) => this.#idleWaiters.push(resolve));
    try {
      const answer = await this.#shard.run({ type: 'close', key: this.staging.key, flush });
      this.#shard.uplinkedBy(answer as PcmAnswer);
      if (answer.ok && 'recreated' in answer && answer.pcm.some((p) => p.length > 0)) this.#emitPcm(answer.pcm, 0, 0, false, true);
    } catch {
      // The thread died while closing: its decoders went with it, nothing is left to flush.
    }
    this.#state = 'closed';
    this.staging.keep = undefined;
    this.#shard.forget(this);
    this.emit('close');
  }

  /** @internal this stream's part of the answer to a task (or the error that lost it). */
  settle(part: StreamPart | Error, messages: number): void {
    if (part instanceof Error) this.#lost(new EngineError('ENG_ERR_CODEC_FAILED', { reason: 'codec thread exited' }, { cause: part }), messages);
    else if ('ok' in part) this.#lost(rebuild(part), messages);
    else this.#emitPcm(part.pcm, part.frames, part.corruptFrames, part.recreated, false);
    this.#maybeIdle();
  }

  /** @internal samples the shard sent on a channel's socket. */
  uplinked(channel: number, samples: number): void {
    const s = this.stats.samples;
    s[channel] = (s[channel] ?? 0) + samples;
    if (this.#started[channel] === false) {
      this.#started[channel] = true;
      this.#fitHold();
    }
    this.emit('uplinked', channel, samples);
  }

  /**
   * What the stream holds out for: the least of its open sockets' next messages (the first, until the socket took
   * audio); nothing once it is closing or has no open socket.
   */
  #fitHold(): void {
    let hold = Infinity;
    if (this.#state === 'open') {
      this.#sockets.forEach((s, ch) => {
        const plan = s?.plan;
        if (plan !== undefined) hold = Math.min(hold, this.#started[ch] ? plan.messageSamples : plan.firstSamples);
      });
    }
    this.staging.hold = hold === Infinity ? 0 : hold;
    this.#shard.checkDue(this);
  }

  /** Nothing of this stream is staged or in flight any more: a waiting close() goes on. */
  #maybeIdle(): void {
    if (!this.staging.idle) return;
    const waiters = this.#idleWaiters;
    this.#idleWaiters = [];
    for (const w of waiters) w();
  }

  #emitPcm(pcm: Int16Array[], frames: number, corruptFrames: number, recreated: boolean, final: boolean): void {
    this.stats.frames += frames;
    this.stats.corruptFrames += corruptFrames;
    if (recreated) this.stats.recreations++;
    const samples = this.stats.samples;
    for (let i = 0; i < pcm.length; i++) samples[i] = (samples[i] ?? 0) + pcm[i]!.length;
    this.emit('pcm', pcm, { frames, corruptFrames, recreated, sampleRate: OUTPUT_SAMPLE_RATE_HZ, final });
  }

  #lost(error: EngineError, messages: number): void {
    this.stats.lostMessages += messages;
    this.emit('failure', error, messages);
  }
}
