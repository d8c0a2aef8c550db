// One codec shard: a thread (engine/runtime/task-thread.ts), or the main thread itself, and the sessions pinned to it.
// It gathers every due stream's staged audio into one decode task and routes the answers and its sockets' events back.
import { performance } from 'node:perf_hooks';
import type { CodecAnswer, CodecTask, FailAnswer, PackedAnswer, UplinkEvent } from '../../workers/messages.js';
import { eachPackedPart, forEachRecord, MAX_SPARE_BUFFERS, type StreamPart } from '../../workers/packing.js';
import { InlineRunner, TaskThread, type TaskRunner } from '../runtime/task-thread.js';
import type { LoopTimes } from '../runtime/main-load.js';
import type { Staging } from './staging.js';
import type { ProviderSocket } from './uplink.js';

/** What a shard needs of each stream pinned to it (engine/codec/stream.ts CodecStream). */
export interface ShardMember {
  readonly staging: Staging;
  readonly stats: { tasks: number };
  /** Its part of a task's answer, or what lost it, for the `messages` messages the task carried. */
  settle(part: StreamPart | Error, messages: number): void;
  /** Samples the shard sent on the socket of `channel` instead of answering with them. */
  uplinked(channel: number, samples: number): void;
}

export interface ShardOptions {
  index: number;
  /** The worker module (workers/decode.ts or a test's fixture). */
  filename: string;
  windowMs: number;
  maxHoldMs: number;
  onTaskDelay: ((seconds: number, shard: string) => void) | undefined;
  /** The main thread's shard: tasks answered synchronously on this thread. */
  inline: boolean;
}

/**
 * Opus, LC3 and AAC decoders carry state from frame to frame, so a session's decoders live in one thread
 * (workers/decode.ts) and every message of that session goes there. One task carries the records of every stream that
 * is due, copied stream by stream into one moved buffer (a task never reads the records of streams held back), and its
 * answer brings every stream's PCM back in one moved buffer. A shard keeps one task in flight and sends at most one
 * per batch window, so at load one thread hop and two buffer moves serve every session of the shard; an idle shard
 * sends at once. A stream whose provider takes audio in messages holds its frames back until they complete the next
 * one (its send plan, at most `maxHoldMs`): the frame that completes it is decoded as soon as it would be without a
 * hold, and the ones before it ride in the same batch instead of costing a batch each on both threads.
 */
export class Shard {
  readonly index: number;
  readonly inline: boolean;
  readonly #members = new Map<number, ShardMember>();
  /**
   * Provider sockets held by this shard, by stream key and channel: a socket outlives its codec stream (the provider's
   * last answers come after the decoders' tail), so its events are routed from here.
   */
  readonly #sockets = new Map<number, (ProviderSocket | undefined)[]>();
  /** Started by the first task: an idle node keeps no codec thread (nor the codecs' modules) in memory. */
  #thread: TaskRunner<CodecTask, CodecAnswer> | undefined;
  readonly #startThread: () => TaskRunner<CodecTask, CodecAnswer>;
  readonly #windowMs: number;
  readonly #maxHoldMs: number;
  readonly #onTaskDelay: ((seconds: number, shard: string) => void) | undefined;
  /** The shard as metrics name it: its index, or "main" for the main thread's. */
  readonly #label: string;
  /**
   * Buffers of answers already read (every 'pcm' listener has copied what it keeps), moved back to the thread with the
   * next task so it fills them again instead of allocating (workers/packing.ts PcmBuffers says why).
   */
  #spare: ArrayBuffer[] = [];
  /** Members with staged records, in the order they first staged. */
  #staged: ShardMember[] = [];
  /** Staged members that are due. */
  #due = 0;
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

  constructor(o: ShardOptions) {
    this.index = o.index;
    this.inline = o.inline;
    this.#windowMs = o.windowMs;
    this.#maxHoldMs = o.maxHoldMs;
    this.#onTaskDelay = o.onTaskDelay;
    this.#label = o.inline ? 'main' : String(o.index);
    const onEvent = (e: unknown): void => this.#sockets.get((e as UplinkEvent).key)?.[(e as UplinkEvent).channel]?.event(e as UplinkEvent);
    // Decode tasks go one at a time (see #send); the others go as they come.
    this.#startThread = () => o.inline
      ? new InlineRunner<CodecTask, CodecAnswer>(o.filename, onEvent)
      : new TaskThread<CodecTask, CodecAnswer>(
          o.filename,
          () => {
            this.crashes++;
            // The provider sockets went with the thread: their streams fail over as on a dropped connection.
            for (const s of this.#allSockets()) s.lost(1006, 'codec thread exited');
          },
          onEvent,
        );
  }

  get size(): number {
    return this.#members.size;
  }

  get members(): IterableIterator<ShardMember> {
    return this.#members.values();
  }

  add(m: ShardMember): void {
    this.#members.set(m.staging.key, m);
  }

  forget(m: ShardMember): void {
    if (this.#members.delete(m.staging.key)) this.closedSinceTidy++;
  }

  /** A socket this shard holds for stream `socket.key`, until socketGone(). */
  holdSocket(socket: ProviderSocket): void {
    const list = this.#sockets.get(socket.key) ?? [];
    list[socket.channel] = socket;
    this.#sockets.set(socket.key, list);
  }

  socketGone(socket: ProviderSocket): void {
    const list = this.#sockets.get(socket.key);
    if (list?.[socket.channel] !== socket) return;
    list[socket.channel] = undefined;
    if (!list.some(Boolean)) this.#sockets.delete(socket.key);
  }

  /** The thread's event-loop times in ms; undefined before its thread started, and for the main thread's shard. */
  loopTimes(): LoopTimes | undefined {
    return this.#thread?.loopTimes?.();
  }

  /** Whether the shard's thread (or the inline shard's module) was started by a task. */
  get started(): boolean {
    return this.#thread !== undefined;
  }

  run(task: CodecTask, transferList?: ArrayBuffer[]): Promise<CodecAnswer> {
    if (this.#destroyed) return Promise.reject(new Error('thread destroyed'));
    return (this.#thread ??= this.#startThread()).run(task, transferList);
  }

  /** Tells each open stream what the shard sent on its sockets for an answer (workers/decode.ts withUplinked()). */
  uplinkedBy(answer: { uplinked?: number[] }): void {
    const sent = answer.uplinked;
    // By the open streams, not the sockets: a socket terminated here may still have taken audio in the shard.
    if (sent) for (let i = 0; i < sent.length; i += 3) this.#members.get(sent[i]!)?.uplinked(sent[i + 1]!, sent[i + 2]!);
  }

  /** Copies a message holding `samples` of audio into its stream's staging area; a task takes it once it is due. */
  stage(m: ShardMember, message: Uint8Array, samples: number): void {
    const s = m.staging;
    if (s.messages === 0) {
      this.#staged.push(m);
      s.since = performance.now();
      s.samples = 0;
    }
    s.records.add(s.key, message);
    s.messages++;
    s.bytes += message.byteLength;
    s.samples += samples;
    this.checkDue(m);
    // Held back: the shard's timer still has to let it go once its hold runs out.
    if (!s.due && s.messages === 1) this.#kick();
  }

  /** Makes a stream due once its staged audio is what it holds out for. */
  checkDue(m: ShardMember): void {
    const s = m.staging;
    if (s.due || s.messages === 0 || s.samples < s.hold) return;
    s.due = true;
    s.dueAt = performance.now();
    this.#due++;
    this.#kick();
  }

  /** Drops a stream's staged records (its close without flush). */
  unstage(m: ShardMember): void {
    const s = m.staging;
    if (s.messages === 0) return;
    s.records.clear();
    this.#staged = this.#staged.filter((x) => x !== m);
    s.messages = s.bytes = s.samples = 0;
    if (s.due) this.#due--;
    s.due = false;
  }

  /** When the next task may go: the window after the last, and with nothing due, once the oldest hold has run out. */
  #nextSendAt(): number {
    const at = this.#lastSentAt + this.#windowMs;
    return this.#due > 0 ? at : Math.max(at, this.#staged[0]!.staging.since + this.#maxHoldMs);
  }

  /**
   * Sends the due records once no task is in flight and the window since the last one has passed; even then not
   * synchronously but after the current event-loop turn, so every frame the transport delivers in one turn (uWS hands
   * over all sockets' messages of one poll) rides in the same task.
   */
  #kick(): void {
    if (this.#inFlight || this.#destroyed || this.#staged.length === 0) return;
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
      if (this.#inFlight || this.#destroyed || this.#staged.length === 0) return;
      if (performance.now() >= this.#nextSendAt()) this.#send();
      else this.#kick();
    };
    this.#timerAt = at;
    this.#timer = wait <= 0 ? setImmediate(go) : setTimeout(go, wait);
  }

  /** The members whose staged audio goes now (due, or held for maxHoldMs), taken off the staged list in order. */
  #takeDue(): ShardMember[] {
    const all = this.#staged;
    const oldest = performance.now() - this.#maxHoldMs;
    if (this.#due === all.length || all[all.length - 1]!.staging.since <= oldest) {
      this.#staged = [];
      return all;
    }
    const held: ShardMember[] = [];
    const taken: ShardMember[] = [];
    for (const m of all) {
      if (m.staging.due || m.staging.since <= oldest) taken.push(m);
      else held.push(m);
    }
    this.#staged = held;
    return taken;
  }

  #send(): void {
    const members = this.#takeDue();
    // When the longest-waiting audio of the task became due (a held stream: when its hold ran out).
    let dueSince = Infinity;
    let bytes = 0;
    for (const { staging: s } of members) {
      dueSince = Math.min(dueSince, s.due ? s.dueAt : s.since + this.#maxHoldMs);
      bytes += s.records.byteLength;
    }
    const records = new Uint8Array(bytes);
    let words: Uint32Array | undefined; // the records' headers, read when a stream keeps its messages
    let at = 0;
    this.#due = 0;
    const params = new Int32Array(members.length * 4);
    for (let i = 0; i < members.length; i++) {
      const m = members[i]!;
      const s = m.staging;
      params[i * 4] = s.key;
      params[i * 4 + 1] = s.codecIndex;
      params[i * 4 + 2] = s.sampleRate;
      params[i * 4 + 3] = s.channels;
      const from = at;
      at = s.records.takeInto(records, at);
      // Kept here rather than as each message arrives: the first message of the task fetches the stream's kept audio
      // into the cache, and the rest find it at hand.
      if (s.keep !== undefined) forEachRecord(records, (words ??= new Uint32Array(records.buffer)), from, at, s.keep);
      s.sent();
      m.stats.tasks++;
    }
    this.#inFlight = true;
    this.#lastSentAt = performance.now();
    this.tasks++;
    this.batches += members.length;
    const spare = this.#spare;
    this.#spare = [];
    this.run({ type: 'decodePacked', params, records, spare }, [records.buffer as ArrayBuffer, params.buffer, ...spare]).then(
      (answer) => {
        this.#onTaskDelay?.((performance.now() - dueSince) / 1000, this.#label);
        this.#settle(members, answer as PackedAnswer | FailAnswer);
      },
      // The thread died with the task (a new one is starting): these batches are lost, the sessions are not.
      (err: unknown) => this.#settle(members, err instanceof Error ? err : new Error(String(err))),
    );
  }

  #settle(members: ShardMember[], answer: PackedAnswer | FailAnswer | Error): void {
    this.#inFlight = false;
    // The answer has one part per stream of the task, in the task's order (workers/decode.ts).
    if (answer instanceof Error || !answer.ok) {
      for (const m of members) m.settle(answer, m.staging.answered());
    } else {
      this.uplinkedBy(answer);
      let i = 0;
      eachPackedPart(answer, (key, part) => {
        const m = members[i++];
        if (m !== undefined && m.staging.key === key) m.settle(part, m.staging.answered());
      });
      let missing: Error | undefined; // an Error (and its stack) only when a stream actually lacks an answer
      for (const m of members) if (m.staging.inFlightMessages > 0) m.settle((missing ??= new Error('no answer for the stream')), m.staging.answered());
      // Every listener has had its views of the answer and copied what it keeps: the buffer can be filled again.
      if (this.#spare.length < MAX_SPARE_BUFFERS && answer.pcm.buffer.byteLength > 0) this.#spare.push(answer.pcm.buffer as ArrayBuffer);
    }
    this.#kick();
  }

  #allSockets(): ProviderSocket[] {
    return [...this.#sockets.values()].flatMap((list) => list.filter((s): s is ProviderSocket => s !== undefined));
  }

  destroy(): Promise<void> {
    // Sockets held on this thread (the inline shard) would outlive the runner: free them first.
    for (const s of this.#allSockets()) s.terminate();
    this.#destroyed = true;
    clearTimeout(this.#timer as NodeJS.Timeout);
    clearImmediate(this.#timer as NodeJS.Immediate);
    return this.#thread?.destroy() ?? Promise.resolve();
  }
}
