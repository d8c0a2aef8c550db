// The codec shards: one thread each (engine/runtime/task-thread.ts) that decodes live audio; each session is pinned to one shard.
//
// Rationale: Opus, LC3 and AAC decoders carry state from frame to frame, so a session's decoders live in one
// thread (workers/decode.ts) and every message of that session goes there. A message is copied, on arrival, into its
// stream's staging area (a record: stream number, length, bytes); one task carries the records of every stream that is
// due, copied stream by stream into one moved buffer (a task never reads the records of streams held back: with one
// shared area it scanned and compacted every staged record, most of them held, at every task), and its answer brings
// every stream's PCM back in one moved buffer. A shard keeps one task in flight and sends at most one per
// `batchWindowMs` (5 ms), so a session is in at most one task at a time and, at load, one thread hop and two buffer
// moves serve every session of the shard (no per-frame task, transfer or allocation). An idle shard sends at once: a
// lone frame is not held back. A session whose consumer sends on in messages (a remote provider, 100 ms) holds its
// frames back until they complete the next message (holdUntil(), at most `maxHoldMs`): the frame that completes it is
// decoded as soon as it would be without a hold, and the four before it ride in the same batch instead of costing a
// batch each on both threads (the per-session work of a batch, not the decoding, was most of the engine's cost above
// the codec's). One more shard may be the main thread itself (CodecPoolOptions.inline, engine/runtime/main-load.ts): the same
// records and answers, handled synchronously, for sessions opened while that thread has room.
import { EventEmitter } from 'node:events';
import { availableParallelism } from 'node:os';
import { performance } from 'node:perf_hooks';
import { EngineError } from '../errors.js';
import { encodedDurationS } from '../audio/encoded-duration.js';
import { checkCodecParams, codecIndex, OUTPUT_SAMPLE_RATE_HZ, type CodecAnswer, type CodecParams, type CodecTask, type FailAnswer, type HeapAnswer, type PackedAnswer, type PcmAnswer, type UplinkEvent, type UplinkOpenAnswer, type UplinkOpenTask } from '../../workers/messages.js';
import { eachPackedPart, forEachRecord, MAX_SPARE_BUFFERS, RecordWriter } from '../../workers/packing.js';
import { InlineRunner, TaskThread, type TaskRunner } from '../runtime/task-thread.js';

export { CODECS, CODEC_SAMPLE_RATES_HZ, OUTPUT_SAMPLE_RATE_HZ, type Codec, type CodecParams } from '../../workers/messages.js';

export interface CodecPoolOptions {
  /**
   * Codec shards, one thread each (CODEC_THREADS, read by engine/config.ts and passed in here).
   * @defaultValue `os.availableParallelism() - 1`, at least 2: with one, every session's audio waits whenever that
   * thread is off its core. On 2 vCPUs at 450 sessions, one shard with a 20 ms window had a p99 decode delay of 98 ms
   * and two with 5 ms 24 ms; another day, at 500, one shard with 5 ms had 25 ms and cost ~10-15% less CPU than two
   */
  threads?: number;
  /**
   * Least time between two decode tasks of a shard, in milliseconds: what arrives meanwhile leaves together. Audio
   * complete for its consumer waits on average half of it plus the decoding of what gathered meanwhile.
   * @defaultValue 5
   */
  batchWindowMs?: number;
  /**
   * Longest a stream's staged audio is held back for its consumer (CodecStream.holdUntil()), in milliseconds.
   * @defaultValue 100
   */
  maxHoldMs?: number;
  /**
   * Whether a session being opened now decodes on the calling (main) thread instead of a shard, given the sessions
   * open (engine/runtime/main-load.ts decides for the engine): asked at each open(), and the session stays where it was put.
   * Absent: every session goes to a shard.
   */
  inline?: (sessions: number) => boolean;
  /**
   * Whether remote providers' sockets may live in the shard that decodes the session (STT_SOCKETS=codec): the
   * session's PCM then goes onto the socket from that thread (CodecStream.uplink()). @defaultValue false
   */
  uplinks?: boolean;
  /** Worker module; tests point it at a fixture. @defaultValue dist/workers/decode.js */
  filename?: string;
  /**
   * Called as each decode task is answered, with how long its longest-waiting audio waited, in seconds: from the
   * moment it was due (complete for its consumer, or held for `maxHoldMs`) to its PCM back on this thread. The
   * engine's own share of a live frame's delay; an operator's sign of a node near saturation (the /metrics histogram
   * listen_decode_delay_seconds).
   */
  onTaskDelay?: (seconds: number) => void;
}

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
  /** Samples out per channel, at 16 kHz. */
  samples: number[];
  /** Decode tasks this stream's audio rode in. */
  tasks: number;
  /** Times the decoders were re-created after a thread crash or decoder failure. */
  recreations: number;
}

/** One codec shard thread's V8 heap, as `CodecPool.threadHeaps()` reads it: the thread's answer and its shard. */
export type ShardHeap = Omit<HeapAnswer, 'ok'> & { shard: number };

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
   * PCM of `channel` the shard sent on the channel's provider socket instead of answering with it (CodecStream.uplink()),
   * in order with the 'pcm' events: `samples` 16 kHz samples.
   */
  uplinked: [channel: number, samples: number];
}

/** What a provider socket held by a codec shard tells its owner on the main thread (CodecStream.uplink()). */
export interface UplinkHandlers {
  text(text: string): void;
  /** The socket closed (by the provider, the network, or a codec thread that exited: code 1006); nothing follows. */
  close(code: number, reason: string): void;
  /** More than `maxBufferedBytes` waits on the socket. */
  stuck(): void;
}

/** How to open a provider socket in a shard (workers/messages.ts UplinkOpenTask without the stream's own fields). */
export type UplinkSpec = Omit<UplinkOpenTask, 'type' | 'key' | 'channel'>;

/**
 * A provider socket in the shard of a session's codec stream, for one channel (CodecStream.uplink()); it is the
 * ProviderSocket (engine/stt/remote/socket.ts) a provider stream runs over. Tasks reach the thread in order, so text
 * sent after the 'pcm' or 'uplinked' event of a batch goes out after that batch's audio.
 */
export class ShardUplink {
  readonly inShard = true;
  /** The shard watches what waits on the socket itself and reports 'stuck'. */
  readonly bufferedAmount = 0;
  #handlers: UplinkHandlers | undefined;
  /** Events that came before listen(): the provider may speak in the same read as the upgrade's answer. */
  #early: ((h: UplinkHandlers) => void)[] = [];
  #closed = false;

  /** @internal built by CodecStream.uplink() */
  constructor(
    readonly stream: CodecStream,
    readonly channel: number,
    readonly run: (task: CodecTask, transferList?: ArrayBuffer[]) => Promise<CodecAnswer>,
  ) {}

  /** Opens the socket; resolves with how the handshake went (a refusal's status and Retry-After). */
  async open(spec: UplinkSpec): Promise<UplinkOpenAnswer> {
    const answer = (await this.run({ type: 'uplinkOpen', key: this.stream.key, channel: this.channel, ...spec })) as UplinkOpenAnswer | FailAnswer;
    if ('code' in answer) return { ok: false, why: answer.message };
    return answer;
  }

  /** Who hears the socket's text, close and 'stuck' (what came before is told now). */
  listen(handlers: UplinkHandlers): void {
    if (this.#closed && this.#early.length === 0) return;
    this.#handlers = handlers;
    for (const f of this.#early.splice(0)) f(handlers);
  }

  /** A text message; `flush` sends a rest of PCM still waiting in the shard first. */
  sendText(text: string, flush: boolean): void {
    if (!this.#closed) void this.run({ type: 'uplinkText', key: this.stream.key, channel: this.channel, text, flush }).catch(() => undefined);
  }

  /** PCM that reached this thread (copied: the caller's array may be a view into a shard's answer). */
  sendAudio(pcm: Int16Array): void {
    if (this.#closed || pcm.length === 0) return;
    const copy = pcm.slice();
    void this.run({ type: 'uplinkPcm', key: this.stream.key, channel: this.channel, pcm: copy }, [copy.buffer]).catch(() => undefined);
  }

  /** Frees the socket in the shard at once; no handler is called afterwards. */
  terminate(): void {
    this.#end(undefined);
  }

  /**
   * Ends the socket in the shard with a close frame of `code` (at once if it is not open); no handler is called
   * afterwards.
   */
  close(code: number): void {
    this.#end(code);
  }

  #end(code: number | undefined): void {
    this.#handlers = undefined;
    this.#early = [];
    if (this.#closed) return;
    this.#closed = true;
    this.stream.dropUplink(this);
    void this.run({ type: 'uplinkClose', key: this.stream.key, channel: this.channel, ...(code !== undefined ? { code } : {}) }).catch(() => undefined);
  }

  /** @internal an event of the socket in the shard. */
  event(e: UplinkEvent): void {
    if (this.#closed) return;
    if (e.kind === 'text') this.#tell((h) => h.text(e.text));
    else if (e.kind === 'stuck') this.#tell((h) => h.stuck());
    else this.lost(e.code, e.reason);
  }

  /** @internal the socket is gone (closed in the shard, or its thread exited). */
  lost(code: number, reason: string): void {
    if (this.#closed) return;
    this.#closed = true;
    this.stream.dropUplink(this);
    this.#tell((h) => h.close(code, reason));
    this.#handlers = undefined;
  }

  #tell(f: (h: UplinkHandlers) => void): void {
    if (this.#handlers) f(this.#handlers);
    else this.#early.push(f);
  }
}

function rebuild(answer: { code: string; message: string }): EngineError {
  const code = answer.code === 'ENG_ERR_CODEC_UNSUPPORTED' || answer.code === 'ENG_ERR_CODEC_FAILED' ? answer.code : 'ENG_ERR_INTERNAL';
  return new EngineError(code, { reason: answer.message });
}

/** One session's audio through its shard. Create with `CodecPool.open()`. */
export class CodecStream extends EventEmitter<CodecStreamEvents> {
  readonly sessionId: string;
  /** @internal the stream's number, unique in the process (records and answers name it). */
  readonly key: number;
  readonly params: Readonly<CodecParams>;
  /** @internal the codec's number on the wire (workers/messages.ts CODECS). */
  readonly codecIndex: number;
  readonly stats: CodecStreamStats;
  /** Resolves once the shard created the decoders; rejects with an EngineError if it could not. */
  readonly ready: Promise<void>;
  readonly #shard: Shard;
  /** @internal the records staged for the shard's next task (a stream's own, so a task never reads held-back ones). */
  readonly staging = new RecordWriter();
  /** @internal messages and bytes staged for the shard's next task, and those in its task in flight. */
  stagedMessages = 0;
  stagedBytes = 0;
  /** @internal 16 kHz samples the staged messages hold (counted only while the stream is held back), and since when the oldest waits. */
  stagedSamples = 0;
  stagedAt = 0;
  /** @internal the staged audio goes in the next task: enough of it is there, or nothing holds it back. */
  due = false;
  /** @internal when it became due (performance.now() time). */
  dueAt = 0;
  /** @internal samples to gather before the staged audio is due (holdUntil()). */
  holdSamples = 0;
  inFlightMessages = 0;
  inFlightBytes = 0;
  /**
   * Each message as it leaves for the decoder, in order, lent for the call (copy what is kept): called while the task
   * that decodes it is put together, for the stream's messages of that task one after the other.
   *
   * Rationale: the session's encoded tail (engine/listen/session-stt.ts) copied each message as it arrived, one frame
   * at a time among hundreds of sessions, so every copy first fetched the tail's memory again: ~1.4 µs of the ~3.7 µs a
   * frame cost the main thread at 400 sessions (timed around onBinary, fleet bench). Here its first message fetches it
   * and the rest of the task's (~5 at a provider message of 100 ms) find it at hand.
   */
  onSend: ((message: Uint8Array) => void) | undefined = undefined;
  #idleWaiters: (() => void)[] = [];
  #state: 'open' | 'closing' | 'closed' = 'open';
  /** Provider sockets in the shard, by channel (uplink()). */
  #uplinks: (ShardUplink | undefined)[] = [];

  /** @internal built by CodecPool.open() */
  constructor(shard: Shard, key: number, options: CodecStreamOptions) {
    super();
    this.#shard = shard;
    this.key = key;
    this.sessionId = options.sessionId;
    this.params = Object.freeze({ codec: options.codec, sampleRate: options.sampleRate, channels: options.channels });
    this.codecIndex = codecIndex(options.codec);
    this.stats = { messages: 0, frames: 0, corruptFrames: 0, lostMessages: 0, samples: new Array<number>(options.channels).fill(0), tasks: 0, recreations: 0 };
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

  /**
   * A provider socket for `channel` in this stream's shard, when the pool lets sockets live there
   * (CodecPoolOptions.uplinks): once it is open, that channel's PCM goes onto it from the shard and comes back here
   * only as 'uplinked' counts (or as 'pcm' once the socket is gone). Undefined when the pool keeps sockets here.
   */
  uplink(channel: number): ShardUplink | undefined {
    if (!this.#shard.uplinks || this.#state !== 'open') return undefined;
    this.#uplinks[channel]?.terminate();
    const u = new ShardUplink(this, channel, (task, transferList) => this.#shard.run(task, transferList));
    this.#uplinks[channel] = u;
    this.#shard.holdsUplinks(this, true);
    return u;
  }

  /** @internal an event of one of the stream's sockets in the shard. */
  uplinkEvent(e: UplinkEvent): void {
    this.#uplinks[e.channel]?.event(e);
  }

  /** @internal every socket of the stream is gone with its thread (a crash). */
  uplinksLost(code: number, reason: string): void {
    for (const u of [...this.#uplinks]) u?.lost(code, reason);
  }

  /** @internal the open sockets, for the pool to free them. */
  get openUplinks(): ShardUplink[] {
    return this.#uplinks.filter((u): u is ShardUplink => u !== undefined);
  }

  /** @internal a socket of the stream is gone (terminated or lost): its events are no longer routed here. */
  dropUplink(u: ShardUplink): void {
    if (this.#uplinks[u.channel] === u) this.#uplinks[u.channel] = undefined;
    if (!this.#uplinks.some(Boolean)) this.#shard.holdsUplinks(this, false);
  }

  /** @internal samples a shard sent on a channel's socket. */
  uplinked(channel: number, samples: number): void {
    const s = this.stats.samples;
    s[channel] = (s[channel] ?? 0) + samples;
    this.emit('uplinked', channel, samples);
  }

  /** Bytes pushed whose PCM has not come back (staged or being decoded). */
  get pendingBytes(): number {
    return this.stagedBytes + this.inFlightBytes;
  }

  /**
   * Queues one WebSocket message (for two channels: channel-id byte first). Its bytes are copied at once, so the
   * caller's buffer is free when this returns. While the stream holds audio back it reads the seconds the message
   * holds from its bytes. Keep-alive messages (≤ 2 bytes, SPEC) are the session layer's to drop.
   */
  push(message: Uint8Array): void {
    if (this.#state !== 'open') throw new EngineError('ENG_ERR_CODEC_STREAM_CLOSED', { sessionId: this.sessionId });
    this.stats.messages++;
    const p = this.params;
    // Two channels' time is the first channel's (encodedDurationS counts only its messages).
    this.#shard.stage(this, message, this.holdSamples > 0 ? encodedDurationS(p.codec, p.sampleRate, p.channels, message) * OUTPUT_SAMPLE_RATE_HZ : 0);
  }

  /**
   * Holds staged audio back until it decodes to at least `samples` 16 kHz samples (or has waited the pool's
   * `maxHoldMs`), then decodes it in one batch. A consumer that sends audio on in messages (engine/stt/remote/pcm-batcher.ts)
   * names what its next message lacks: the audio that completes it is decoded when it arrives, as without a hold, and
   * the frames before it ride along instead of costing a batch each. 0 (the default): every message goes in the next task.
   */
  holdUntil(samples: number): void {
    this.holdSamples = Math.max(0, samples);
    this.#shard.checkDue(this);
  }

  /**
   * Ends the stream. With `flush` (default) the queued messages are decoded and the decoders' tail is emitted as a
   * final 'pcm'; without it queued audio is dropped and the decoders are freed at once. Emits 'close' and resolves.
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
    else this.holdUntil(0);
    await this.ready.catch(() => undefined);
    if (this.stagedMessages > 0 || this.inFlightMessages > 0) await new Promise<void>((resolve) => this.#idleWaiters.push(resolve));
    try {
      const answer = await this.#shard.run({ type: 'close', key: this.key, flush });
      this.#shard.uplinkedBy(answer as PcmAnswer);
      if (answer.ok && 'recreated' in answer && answer.pcm.some((p) => p.length > 0)) this.#emitPcm(answer.pcm, 0, 0, false, true);
    } catch {
      // The thread died while closing: its decoders went with it, nothing is left to flush.
    }
    this.#state = 'closed';
    this.#shard.forget(this);
    this.emit('close');
  }

  /** @internal the messages of the task in flight, now answered for: the count, and none in flight after. */
  takeInFlight(): number {
    const messages = this.inFlightMessages;
    this.inFlightMessages = this.inFlightBytes = 0;
    return messages;
  }

  /** @internal this stream's part of the answer to a task (or the error that lost it). */
  settle(part: { pcm: Int16Array[]; frames: number; corruptFrames: number; recreated: boolean } | FailAnswer | Error, messages: number): void {
    if (part instanceof Error) this.#lost(new EngineError('ENG_ERR_CODEC_FAILED', { reason: 'codec thread exited' }, { cause: part }), messages);
    else if ('ok' in part) this.#lost(rebuild(part), messages);
    else this.#emitPcm(part.pcm, part.frames, part.corruptFrames, part.recreated, false);
    this.#maybeIdle();
  }

  /** @internal nothing of this stream is staged or in flight any more: a waiting close() goes on. */
  #maybeIdle(): void {
    if (this.stagedMessages > 0 || this.inFlightMessages > 0) return;
    const waiters = this.#idleWaiters;
    this.#idleWaiters = [];
    for (const w of waiters) w();
  }

  /** @internal the shard dropped this stream's staged audio (close without flush). */
  unstaged(): void {
    this.#maybeIdle();
  }

  #emitPcm(pcm: Int16Array[], frames: number, corruptFrames: number, recreated: boolean, final: boolean): void {
    this.stats.frames += frames;
    this.stats.corruptFrames += corruptFrames;
    if (recreated) this.stats.recreations++;
    const samples = this.stats.samples;
    for (let i = 0; i < pcm.length; i++) samples[i] = (samples[i] ?? 0) + pcm[i]!.length;
    this.emit('pcm', pcm, { frames, corruptFrames, recreated, sampleRate: 16000, final });
  }

  #lost(error: EngineError, messages: number): void {
    this.stats.lostMessages += messages;
    this.emit('failure', error, messages);
  }
}

/**
 * Stream numbers, unique in the process: the main thread's decoders (workers/decode.ts imported here) are one map for
 * every pool of the process.
 */
let nextStreamKey = 1;

/** @internal one codec thread (or the main thread) and the sessions pinned to it. */
class Shard {
  readonly #streams = new Map<number, CodecStream>();
  /**
   * Streams with a provider socket in this shard, by key: a socket outlives its codec stream (the provider's last
   * answers come after the decoders' tail), so its events are routed from here, not from `#streams`.
   */
  readonly #uplinkStreams = new Map<number, CodecStream>();
  readonly #thread: TaskRunner<CodecTask, CodecAnswer>;
  readonly #windowMs: number;
  /**
   * Buffers of answers already read (every 'pcm' listener has copied what it keeps), moved back to the thread with the
   * next task so it fills them again instead of allocating (workers/packing.ts PcmBuffers says why).
   */
  #spare: ArrayBuffer[] = [];
  /** Streams with staged records, in the order they first staged. */
  #stagedStreams: CodecStream[] = [];
  /** Staged streams that are due. */
  #due = 0;
  readonly #maxHoldMs: number;
  #inFlight = false;
  #lastSentAt = -Infinity;
  #timer: NodeJS.Timeout | NodeJS.Immediate | undefined;
  /** When the pending timer fires (performance.now() time). */
  #timerAt = 0;
  #destroyed = false;
  /** Thread exits seen (crashes); TaskThread replaces the thread. */
  crashes = 0;
  /** Streams closed since the thread was last asked to tidy its heap (CodecPool.tidyThreads()). */
  closedSinceTidy = 0;
  /** Decode tasks sent, and stream batches they carried (their ratio is the batching achieved). */
  tasks = 0;
  batches = 0;

  constructor(
    readonly index: number,
    filename: string,
    windowMs: number,
    maxHoldMs: number,
    readonly onTaskDelay: ((seconds: number) => void) | undefined,
    readonly uplinks: boolean,
    readonly inline = false,
  ) {
    this.#windowMs = windowMs;
    this.#maxHoldMs = maxHoldMs;
    const onEvent = (e: unknown): void => this.#uplinkStreams.get((e as UplinkEvent).key)?.uplinkEvent(e as UplinkEvent);
    // Decode tasks go one at a time (see #send); open and close go as they come.
    this.#thread = inline
      ? new InlineRunner<CodecTask, CodecAnswer>(filename, onEvent)
      : new TaskThread<CodecTask, CodecAnswer>(
          filename,
          () => {
            this.crashes++;
            // The provider sockets went with the thread: their streams fail over as on a dropped connection.
            for (const s of [...this.#uplinkStreams.values()]) s.uplinksLost(1006, 'codec thread exited');
          },
          onEvent,
        );
  }

  get size(): number {
    return this.#streams.size;
  }

  get streams(): IterableIterator<CodecStream> {
    return this.#streams.values();
  }

  open(options: CodecStreamOptions): CodecStream {
    const key = nextStreamKey++;
    const stream = new CodecStream(this, key, options);
    this.#streams.set(key, stream);
    return stream;
  }

  forget(stream: CodecStream): void {
    if (this.#streams.delete(stream.key)) this.closedSinceTidy++;
  }

  /** Tells each stream what the shard sent on its sockets for an answer (workers/decode.ts withUplinked()). */
  uplinkedBy(answer: { uplinked?: number[] }): void {
    const sent = answer.uplinked;
    // By the open streams, not the sockets: a socket terminated here may still have taken audio in the shard.
    if (sent) for (let i = 0; i < sent.length; i += 3) this.#streams.get(sent[i]!)?.uplinked(sent[i + 1]!, sent[i + 2]!);
  }

  holdsUplinks(stream: CodecStream, holds: boolean): void {
    if (holds) this.#uplinkStreams.set(stream.key, stream);
    else this.#uplinkStreams.delete(stream.key);
  }

  run(task: CodecTask, transferList?: ArrayBuffer[]): Promise<CodecAnswer> {
    return this.#thread.run(task, transferList);
  }

  /** Copies a message holding `samples` of audio into its stream's staging area; a task takes it once its stream is due. */
  stage(stream: CodecStream, message: Uint8Array, samples: number): void {
    if (stream.stagedMessages === 0) {
      this.#stagedStreams.push(stream);
      stream.stagedAt = performance.now();
      stream.stagedSamples = 0;
    }
    stream.staging.add(stream.key, message);
    stream.stagedMessages++;
    stream.stagedBytes += message.byteLength;
    stream.stagedSamples += samples;
    this.checkDue(stream);
    // Held back: the shard's timer still has to let it go once its hold runs out.
    if (!stream.due && stream.stagedMessages === 1) this.#kick();
  }

  /** Makes `stream` due once its staged audio is what it holds out for. */
  checkDue(stream: CodecStream): void {
    if (stream.due || stream.stagedMessages === 0 || stream.stagedSamples < stream.holdSamples) return;
    stream.due = true;
    stream.dueAt = performance.now();
    this.#due++;
    this.#kick();
  }

  /** Drops a stream's staged records (its close without flush). */
  unstage(stream: CodecStream): void {
    if (stream.stagedMessages === 0) return;
    stream.staging.clear();
    this.#stagedStreams = this.#stagedStreams.filter((s) => s !== stream);
    stream.stagedMessages = stream.stagedBytes = stream.stagedSamples = 0;
    if (stream.due) this.#due--;
    stream.due = false;
    stream.unstaged();
  }

  /** When the next task may go: the window after the last, and with nothing due, once the oldest hold has run out. */
  #nextSendAt(): number {
    const at = this.#lastSentAt + this.#windowMs;
    return this.#due > 0 ? at : Math.max(at, this.#stagedStreams[0]!.stagedAt + this.#maxHoldMs);
  }

  /**
   * Sends the due records once no task is in flight and the window since the last one has passed; even then not
   * synchronously but after the current event-loop turn, so every frame the transport delivers in one turn (uWS hands
   * over all sockets' messages of one poll) rides in the same task.
   */
  #kick(): void {
    if (this.#inFlight || this.#destroyed || this.#stagedStreams.length === 0) return;
    const at = this.#nextSendAt();
    if (this.#timer !== undefined) {
      // A timer set for a hold running out gives way to a stream that became due sooner.
      if (at >= this.#timerAt) return;
      clearTimeout(this.#timer as NodeJS.Timeout);
      clearImmediate(this.#timer as NodeJS.Immediate);
    }
    const wait = at - performance.now();
    const go = (): void => {
      this.#timer = undefined;
      if (this.#inFlight || this.#destroyed || this.#stagedStreams.length === 0) return;
      if (performance.now() >= this.#nextSendAt()) this.#send();
      else this.#kick();
    };
    this.#timerAt = at;
    this.#timer = wait <= 0 ? setImmediate(go) : setTimeout(go, wait);
  }

  /** The streams whose staged audio goes now (due, or held for maxHoldMs), taken off the staged list in order. */
  #takeDue(): CodecStream[] {
    const all = this.#stagedStreams;
    const oldest = performance.now() - this.#maxHoldMs;
    if (this.#due === all.length || all[all.length - 1]!.stagedAt <= oldest) {
      this.#stagedStreams = [];
    } else {
      const held: CodecStream[] = [];
      const taken: CodecStream[] = [];
      for (const s of all) {
        if (s.due || s.stagedAt <= oldest) taken.push(s);
        else held.push(s);
      }
      this.#stagedStreams = held;
      return taken;
    }
    return all;
  }

  #send(): void {
    const streams = this.#takeDue();
    // When the longest-waiting audio of the task became due (a held stream: when its hold ran out).
    let dueSince = Infinity;
    let bytes = 0;
    for (const s of streams) {
      dueSince = Math.min(dueSince, s.due ? s.dueAt : s.stagedAt + this.#maxHoldMs);
      bytes += s.staging.byteLength;
    }
    const records = new Uint8Array(bytes);
    let words: Uint32Array | undefined; // the records' headers, read when a stream wants its messages (onSend)
    let at = 0;
    this.#due = 0;
    const params = new Int32Array(streams.length * 4);
    for (let i = 0; i < streams.length; i++) {
      const s = streams[i]!;
      params[i * 4] = s.key;
      params[i * 4 + 1] = s.codecIndex;
      params[i * 4 + 2] = s.params.sampleRate;
      params[i * 4 + 3] = s.params.channels;
      const from = at;
      at = s.staging.takeInto(records, at);
      if (s.onSend !== undefined) forEachRecord(records, (words ??= new Uint32Array(records.buffer)), from, at, s.onSend);
      s.inFlightMessages = s.stagedMessages;
      s.inFlightBytes = s.stagedBytes;
      s.stagedMessages = s.stagedBytes = s.stagedSamples = 0;
      s.due = false;
      s.stats.tasks++;
    }
    this.#inFlight = true;
    this.#lastSentAt = performance.now();
    this.tasks++;
    this.batches += streams.length;
    const spare = this.#spare;
    this.#spare = [];
    this.run({ type: 'decodePacked', params, records, spare }, [records.buffer as ArrayBuffer, params.buffer, ...spare]).then(
      (answer) => {
        this.onTaskDelay?.((performance.now() - dueSince) / 1000);
        this.#settle(streams, answer as PackedAnswer | FailAnswer);
      },
      // The thread died with the task (a new one is starting): these batches are lost, the sessions are not.
      (err: unknown) => this.#settle(streams, err instanceof Error ? err : new Error(String(err))),
    );
  }

  #settle(streams: CodecStream[], answer: PackedAnswer | FailAnswer | Error): void {
    this.#inFlight = false;
    // The answer has one part per stream of the task, in the task's order (workers/decode.ts).
    if (answer instanceof Error || !answer.ok) {
      for (const s of streams) s.settle(answer, s.takeInFlight());
    } else {
      this.uplinkedBy(answer);
      let i = 0;
      eachPackedPart(answer, (key, part) => {
        const s = streams[i++];
        if (s !== undefined && s.key === key) s.settle(part, s.takeInFlight());
      });
      let missing: Error | undefined; // an Error (and its stack) only when a stream actually lacks an answer
      for (const s of streams) if (s.inFlightMessages > 0) s.settle((missing ??= new Error('no answer for the stream')), s.takeInFlight());
      // Every listener has had its views of the answer and copied what it keeps: the buffer can be filled again.
      if (this.#spare.length < MAX_SPARE_BUFFERS && answer.pcm.buffer.byteLength > 0) this.#spare.push(answer.pcm.buffer as ArrayBuffer);
    }
    this.#kick();
  }

  destroy(): Promise<void> {
    // Sockets held on this thread (the inline shard) would outlive the runner: free them first.
    for (const s of [...this.#uplinkStreams.values()]) for (const u of s.openUplinks) u.terminate();
    this.#destroyed = true;
    clearTimeout(this.#timer as NodeJS.Timeout);
    clearImmediate(this.#timer as NodeJS.Immediate);
    return this.#thread.destroy();
  }
}

/** The process's codec shards. One per process; `close()` ends every thread. */
export class CodecPool {
  readonly #shards: Shard[];
  /** The main thread's shard and the rule that sends sessions there, when they may decode there (options.inline). */
  readonly #inline: { shard: Shard; admit: (sessions: number) => boolean } | undefined;
  #closed = false;

  constructor(options: CodecPoolOptions = {}) {
    const threads = options.threads ?? Math.max(2, availableParallelism() - 1);
    if (!Number.isInteger(threads) || threads < 1) throw new RangeError('threads must be an integer ≥ 1');
    const windowMs = options.batchWindowMs ?? 5;
    const maxHoldMs = options.maxHoldMs ?? 100;
    const filename = options.filename ?? new URL('../../workers/decode.js', import.meta.url).href;
    const uplinks = options.uplinks ?? false;
    this.#shards = Array.from({ length: threads }, (_, i) => new Shard(i, filename, windowMs, maxHoldMs, options.onTaskDelay, uplinks));
    if (options.inline !== undefined) {
      this.#inline = { shard: new Shard(threads, filename, windowMs, maxHoldMs, options.onTaskDelay, uplinks, true), admit: options.inline };
    }
  }

  /** The thread shards, and the main thread's after them. */
  #all(): Shard[] {
    return this.#inline ? [...this.#shards, this.#inline.shard] : this.#shards;
  }

  /** Number of shards (threads). */
  get threads(): number {
    return this.#shards.length;
  }

  /** Open sessions per shard thread. */
  get load(): number[] {
    return this.#shards.map((s) => s.size);
  }

  /** Open sessions decoded on the main thread. */
  get inlineLoad(): number {
    return this.#inline?.shard.size ?? 0;
  }

  /** Decode tasks sent and the stream batches they carried, summed over shards (batches/tasks = batching achieved). */
  get taskStats(): { tasks: number; batches: number } {
    return this.#all().reduce((a, s) => ({ tasks: a.tasks + s.tasks, batches: a.batches + s.batches }), { tasks: 0, batches: 0 });
  }

  /**
   * Opens a session's stream on the least-loaded shard. Throws ENG_ERR_CODEC_UNSUPPORTED at once for a codec,
   * rate or channel count we cannot decode, so the caller can refuse the socket (close 1003) before accepting audio.
   */
  open(options: CodecStreamOptions): CodecStream {
    if (this.#closed) throw new EngineError('ENG_ERR_CODEC_STREAM_CLOSED', { sessionId: options.sessionId });
    const why = checkCodecParams(options);
    if (why !== null) throw new EngineError('ENG_ERR_CODEC_UNSUPPORTED', { reason: why });
    let shard = this.#shards[0]!;
    let sessions = 0;
    for (const s of this.#shards) {
      sessions += s.size;
      if (s.size < shard.size) shard = s;
    }
    const inline = this.#inline;
    if (inline !== undefined && inline.admit(sessions + inline.shard.size)) shard = inline.shard;
    return shard.open(options);
  }

  /**
   * Each shard thread's V8 heap (used and committed bytes), in shard order; a thread that does not answer (crashed,
   * being replaced) is left out. The main thread's heap metrics do not include these.
   */
  async threadHeaps(): Promise<ShardHeap[]> {
    const answers = await Promise.all(this.#shards.map((s) => s.run({ type: 'heap' }).catch(() => undefined)));
    const heaps: ShardHeap[] = [];
    answers.forEach((a, shard) => {
      if (a && a.ok && 'committedBytes' in a) heaps.push({ shard, usedBytes: a.usedBytes, committedBytes: a.committedBytes });
    });
    return heaps;
  }

  /**
   * Asks each shard thread that saw streams close since the last call to give its heap's free memory back
   * (workers/messages.ts TidyTask); answers how many were asked. The inline shard is the main thread's, which
   * engine/runtime/heap-compaction.ts compacts.
   */
  tidyThreads(): number {
    let asked = 0;
    for (const s of this.#shards) {
      if (s.closedSinceTidy === 0) continue;
      s.closedSinceTidy = 0;
      asked++;
      s.run({ type: 'tidy' }).catch(() => undefined);
    }
    return asked;
  }

  /** Test-only: kills shard `index`'s thread (a new one starts; its sessions re-create their decoders). */
  async crashShard(index: number): Promise<void> {
    await this.#shards[index]?.run({ type: 'crash' }).catch(() => {});
  }

  /** Drops every stream's queued audio, frees their decoders and terminates the threads. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    const all = this.#all();
    const streams = all.flatMap((s) => [...s.streams]);
    await Promise.all(streams.map((s) => s.close({ flush: false })));
    await Promise.all(all.map((s) => s.destroy()));
  }
}
