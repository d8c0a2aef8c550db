// Acknowledged audio (ack=enabled): each session's frames go to its audio log; once a second one pass writes every
// session's new records to the node's segment (one write, one fsync) and then acknowledges them all at once; a
// reconnect with `resume` continues the session's log.
import type { Clock } from '../clock.js';
import type { Logger } from '../logger.js';
import type { Scheduler, TimerId } from '../scheduler.js';
import { CloseCode, ListenMessage } from '../protocol.js';
import { encodedDurationS } from '../audio/encoded-duration.js';
import { CHUNK_HEAD, SEGMENT_HEAD, RecordBuffer, RecordType, chunkSeed, isLogId, readSessionLog, segmentName, writeChunkHead, type AudioLogHeader, type AudioLogMark, type AudioLogStore, type ChunkSpans, type SegmentIndex, type SegmentWriter } from './audio-log.js';

/** One pass a second: a device learns within about a second what it may free, and no frame waits on a disk. */
export const ACK_INTERVAL_MS = 1000;
/**
 * A segment is closed and the next one begun after this long or this many bytes: retention frees disk a segment at a
 * time, and a node resuming a session another node still writes reads that node's open segment whole.
 */
export const SEGMENT_MAX_MS = 60_000;
export const SEGMENT_MAX_BYTES = 16 * 1024 * 1024;
/**
 * How long a resumed connection waits for the connection it replaces on this node to finish its audio (its words
 * stored) before it continues the conversation: two sessions writing one conversation's tail would overwrite each other.
 */
const TAKEOVER_WAIT_MS = 5000;
/** A frame whose start lies this close below the log's end is taken for the one already logged (rounding of offsets). */
const DEDUPE_SLACK_MS = 0.5;
/** The answer to a resume of an id this user holds no session of (another user's among them). */
const UNKNOWN = { code: CloseCode.UNKNOWN_SESSION, reason: 'unknown session' } as const;

/** What the session's actor offers its log: the socket's outbox, its conversation, and being replaced. */
export interface AudioLogOwner {
  send(text: string): void;
  /** A frame the log let through (not a duplicate), in order: the actor's own audio path. */
  accept(frame: Uint8Array): void;
  close(code: number, reason: string): void;
  conversationId(): string | undefined;
}

/** A new connection: what its log's header says of it, its own id, and the session it resumes. */
export interface ConnectRequest extends Pick<AudioLogHeader, 'uid' | 'codec' | 'sampleRate' | 'channels' | 'language' | 'source'> {
  /** This connection's session id: the log's id unless it resumes one. */
  sessionId: string;
  resume?: { sessionId: string; offsetMs: number };
}

export interface DurableAudioOptions {
  store: AudioLogStore;
  clock: Clock;
  scheduler: Scheduler;
  logger: Logger;
  /** This process (its segments are named by it; its heartbeat says it lives). */
  writer: string;
  /** Bytes one session's log may hold (all its chunks); past it the session closes with 4413. */
  maxSessionBytes: number;
  /** Bytes of audio logs this node holds; past it a session closes with 1013. */
  maxNodeBytes: number;
  /** Bytes of other writers' segments on disk (the sweep measures them): counted against maxNodeBytes. */
  retainedBytes?: () => number;
  /** Called once per pass (the writer's heartbeat). */
  onPass?: () => Promise<void> | void;
  metrics?: { ackLatencyS?(s: number): void; gapSeconds?(s: number): void; bytes?(n: number): void; full?(scope: 'session' | 'node'): void };
  /** @defaultValue ACK_INTERVAL_MS */
  intervalMs?: number;
}

/** The resumed log's state read back. */
interface Found {
  header: AudioLogHeader;
  originWallMs?: number;
  endMs: number;
  epoch: number;
  bytes: number;
}

/** The segment this node writes. */
interface OpenSegment {
  seq: number;
  name: string;
  writer: SegmentWriter;
  bytes: number;
  openedAtMs: number;
  index: SegmentIndex;
}

/** One session's log on this node: the records waiting for the next pass, and its current connection. */
class SessionLog {
  readonly id: string;
  readonly uid: string;
  /** Checksum seed of the session's chunks (its id). */
  readonly seed: number;
  /** Records not yet handed to a pass; `#writing` what the running pass writes (two buffers, reused). */
  #pending = new RecordBuffer();
  #writing = new RecordBuffer(64);
  /** Session offset (ms) where the audio received so far ends, and where the durable records end. */
  receivedMs: number;
  durableMs: number;
  /** receivedMs when the running pass took the records. */
  #writingUpToMs = 0;
  /** Bytes of the whole log, pending included. */
  bytes: number;
  epoch: number;
  /** Wall-clock time of session offset 0 (from the first connection's first frame). */
  originWallMs: number | undefined;
  current: LogConnection | undefined;
  /** No connection writes to it: it leaves the node once its records are written. */
  closing = false;
  /** The last segment of this node holding its chunks (-1: none yet). */
  lastSeq = -1;
  /** Receive time of the oldest record not yet durable (ack latency): one per pass is enough. */
  #oldestPendingAt = -1;
  #writingSince = -1;

  constructor(id: string, uid: string, endMs: number, bytes: number, epoch: number, originWallMs: number | undefined) {
    this.id = id;
    this.uid = uid;
    this.seed = chunkSeed(id);
    this.receivedMs = endMs;
    this.durableMs = endMs;
    this.bytes = bytes;
    this.epoch = epoch;
    this.originWallMs = originWallMs;
  }

  get dirty(): boolean {
    return this.#pending.length > 0;
  }

  /** Appends one frame's record (copied into the pending buffer); returns the bytes it adds. */
  audio(offsetMs: number, frame: Uint8Array, endMs: number, at: number): number {
    const n = this.#pending.push(RecordType.AUDIO, offsetMs, frame);
    this.bytes += n;
    if (endMs > this.receivedMs) this.receivedMs = endMs;
    if (this.#oldestPendingAt < 0) this.#oldestPendingAt = at;
    return n;
  }

  mark(offsetMs: number, mark: AudioLogMark): number {
    const n = this.#pending.mark(offsetMs, mark);
    this.bytes += n;
    return n;
  }

  /** The pass takes what waits: the records to write (valid until settle()). */
  take(): Buffer {
    const w = this.#writing;
    this.#writing = this.#pending;
    this.#pending = w;
    this.#pending.clear();
    this.#writingUpToMs = this.receivedMs;
    this.#writingSince = this.#oldestPendingAt;
    this.#oldestPendingAt = -1;
    return this.#writing.view();
  }

  /** The pass could not write what it took: it stays unacknowledged. */
  settleFailed(): void {
    this.#writing.clear();
  }

  /** The pass wrote and synced what it took: when the oldest of it arrived, or -1. */
  settle(): number {
    this.#writing.clear();
    this.durableMs = Math.max(this.durableMs, this.#writingUpToMs);
    return this.#writingSince;
  }

  /** Tells the current connection how far the log is durable, when it has not heard it yet; true when it was told. */
  ack(): boolean {
    const c = this.current;
    const upTo = Math.floor(this.durableMs);
    if (!c?.owner || upTo <= c.ackedMs || upTo <= 0) return false;
    c.ackedMs = upTo;
    c.owner.send(`{"type":"${ListenMessage.AUDIO_ACK}","offset_ms":${upTo}}`);
    return true;
  }
}

/**
 * One connection's side of a session log: the offsets of its frames, de-duplication against what the log holds, and
 * frames held while the log opens. Built with the actor, opened by its start().
 */
export class LogConnection {
  readonly #d: DurableAudio;
  readonly #req: ConnectRequest;
  owner: AudioLogOwner | undefined;
  log: SessionLog | undefined;
  epoch = 0;
  /** Session offset of this connection's next frame, and below what a frame is a duplicate. */
  #nextMs = 0;
  #dupBeforeMs = 0;
  #started = false;
  ackedMs = -1;
  /** Frames received before the log opened (copies). */
  #held: Uint8Array[] | undefined = [];
  #gone = false;
  /** Resolves once finished() ran: a connection resuming this session waits for it. */
  readonly done: Promise<void>;
  #resolveDone!: () => void;

  constructor(d: DurableAudio, req: ConnectRequest) {
    this.#d = d;
    this.#req = req;
    this.done = new Promise((resolve) => (this.#resolveDone = resolve));
  }

  /** The id a client resumes with. */
  get logId(): string {
    return this.#req.resume?.sessionId ?? this.#req.sessionId;
  }

  /** Opens (or resumes) the log; false when the session was refused and closed. Sends `audio_session`. */
  async open(owner: AudioLogOwner): Promise<boolean> {
    this.owner = owner;
    const r = await this.#d.attach(this, this.#req);
    if (this.#gone) {
      if ('log' in r) {
        this.log = r.log;
        this.#d.release(this);
      }
      return false;
    }
    if (!('log' in r)) {
      owner.close(r.code, r.reason);
      return false;
    }
    const log = r.log;
    this.log = log;
    this.epoch = log.epoch;
    const resumeAt = this.#req.resume?.offsetMs ?? 0;
    this.#dupBeforeMs = log.receivedMs;
    this.#nextMs = resumeAt;
    if (resumeAt > log.receivedMs + DEDUPE_SLACK_MS) {
      // The client resumed past what this service ever received: say so, do not paper over it.
      const gapMs = resumeAt - log.receivedMs;
      this.#d.nodeBytes += log.mark(log.receivedMs, { kind: 'gap', epoch: this.epoch, toMs: resumeAt });
      this.#d.o.metrics?.gapSeconds?.(gapMs / 1000);
      this.#d.o.logger.warn({ sessionId: log.id, fromMs: Math.floor(log.receivedMs), toMs: resumeAt }, 'resumed session has a gap: audio never received');
      log.receivedMs = resumeAt;
      this.#dupBeforeMs = resumeAt;
    }
    owner.send(JSON.stringify({ type: ListenMessage.AUDIO_SESSION, session_id: log.id, offset_ms: Math.floor(log.receivedMs) }));
    const held = this.#held ?? [];
    this.#held = undefined;
    for (const f of held) if (this.take(f)) owner.accept(f);
    return true;
  }

  /**
   * A frame from the client: true when the actor passes it on. Held (false) while the log opens; a duplicate of
   * audio the log holds is dropped; a full log closes the session.
   */
  take(frame: Uint8Array): boolean {
    if (this.#held !== undefined) {
      this.#held.push(frame.slice());
      return false;
    }
    const log = this.log;
    if (log === undefined || log.current !== this || this.#gone) return false;
    const r = this.#req;
    const startMs = this.#nextMs;
    const endMs = startMs + encodedDurationS(r.codec, r.sampleRate, r.channels, frame) * 1000;
    this.#nextMs = endMs;
    if (startMs < this.#dupBeforeMs - DEDUPE_SLACK_MS) return this.#d.dropped();
    const d = this.#d;
    const now = d.o.clock.now();
    if (!this.#started) {
      this.#started = true;
      log.originWallMs ??= now - startMs;
      d.nodeBytes += log.mark(startMs, { kind: 'start', epoch: this.epoch, wallMs: this.streamStartMs ?? now });
    }
    if (log.bytes + frame.length > d.o.maxSessionBytes) return this.#full('session');
    if (d.nodeBytes + (d.o.retainedBytes?.() ?? 0) + frame.length > d.o.maxNodeBytes) return this.#full('node');
    d.nodeBytes += log.audio(startMs, frame, endMs, now);
    return true;
  }

  #full(scope: 'session' | 'node'): boolean {
    this.#d.o.metrics?.full?.(scope);
    this.#d.o.logger.warn({ sessionId: this.logId, scope }, 'audio log full: closing the session');
    if (scope === 'session') this.owner?.close(CloseCode.AUDIO_LOG_FULL, 'audio log full for this session');
    else this.owner?.close(CloseCode.TRY_AGAIN_LATER, 'audio log full on this node');
    this.#gone = true;
    return false;
  }

  /**
   * Wall-clock time of this connection's stream time 0 when it continues a session (its first frame's session
   * offset after the session's start); undefined for a new session, whose stream starts with its first frame.
   */
  get streamStartMs(): number | undefined {
    const origin = this.log?.originWallMs;
    return origin === undefined || this.#dupBeforeMs <= 0 ? undefined : origin + this.#dupBeforeMs;
  }

  /** Writes what waits now rather than at the next pass (the client left). */
  flush(): void {
    const log = this.log;
    if (log?.current === this && log.dirty) void this.#d.pass();
  }

  /** Notes the conversation this connection's audio goes into (checked each pass). */
  checkConversation(): void {
    const id = this.owner?.conversationId();
    if (id === undefined || id === this.#conversationId || !this.#started || !this.log) return;
    this.#conversationId = id;
    this.#d.nodeBytes += this.log.mark(this.#nextMs, { kind: 'conversation', epoch: this.epoch, conversationId: id, wallMs: this.#d.o.clock.now() });
  }
  #conversationId: string | undefined;

  /** Another connection resumed the session: this one takes no more audio. */
  supersede(): void {
    this.#gone = true;
    this.owner?.close(CloseCode.SESSION_RESUMED, 'session resumed on another connection');
  }

  /**
   * The actor is done. `done`: everything it accepted reached a speech engine or was kept, and an `end` mark says so;
   * otherwise (it never got that far) the sweep hands its logged audio to kept audio.
   */
  finished(done: boolean): void {
    this.#resolveDone();
    this.#gone = true;
    this.#held = undefined;
    const log = this.log;
    if (!log) return;
    if (done && this.#started) this.#d.nodeBytes += log.mark(this.#nextMs, { kind: 'end', epoch: this.epoch });
    this.#d.release(this);
  }
}

/** The node's audio logs: open sessions, the pass that makes them durable and acknowledges them, resume. */
export class DurableAudio {
  readonly o: DurableAudioOptions;
  readonly #logs = new Map<string, SessionLog>();
  readonly #timer: TimerId;
  #passing: Promise<void> | undefined;
  #again = false;
  /** Number of the segment the next write goes to; the segment itself opens at its first write. */
  #seq = 0;
  #segment: OpenSegment | undefined;
  /** Indexes of this node's segments not yet stored beside them (the current one, one just closed). */
  readonly #indexes = new Map<string, SegmentIndex>();
  /** Manifest lines being appended (shutdown waits for them). */
  readonly #appends = new Set<Promise<void>>();
  /** Bytes of this node's segments on disk, and records waiting for a pass. */
  nodeBytes = 0;
  /** Frames dropped as duplicates on resume (tests, metrics). */
  duplicates = 0;
  /** Passes that wrote something (tests). */
  writes = 0;

  constructor(o: DurableAudioOptions) {
    this.o = o;
    this.#timer = o.scheduler.every(o.intervalMs ?? ACK_INTERVAL_MS, () => this.pass());
  }

  connection(req: ConnectRequest): LogConnection {
    return new LogConnection(this, req);
  }

  /** Whether this node has the session's log open (the sweep leaves it alone). */
  isOpen(logId: string): boolean {
    return this.#logs.has(logId);
  }

  /** Session offset (ms) where the audio this node received for an open log ends; undefined when not open here. */
  receivedMs(logId: string): number | undefined {
    return this.#logs.get(logId)?.receivedMs;
  }

  /** The index of one of this node's segments while it is written (readers use it rather than reading the segment). */
  liveIndex(name: string): SegmentIndex | undefined {
    return this.#indexes.get(name);
  }

  /** The segment this node writes now, if any (the sweep never deletes it). */
  get currentSegment(): string | undefined {
    return this.#segment?.name;
  }

  /** The sweep deleted one of this node's closed segments. */
  removedOwn(bytes: number): void {
    this.nodeBytes = Math.max(0, this.nodeBytes - bytes);
  }

  dropped(): boolean {
    this.duplicates++;
    return false;
  }

  /**
   * One pass: every log's new records are written to the segment in one write and synced, then every connection is
   * acknowledged at once. A pass asked for while one runs follows it, so records appended meanwhile wait one pass
   * at most; records arriving during a pass's write wait for the next pass.
   */
  pass(): Promise<void> {
    if (this.#passing) {
      this.#again = true;
      return this.#passing;
    }
    this.#passing = this.#passes().finally(() => (this.#passing = undefined));
    return this.#passing;
  }

  async #passes(): Promise<void> {
    do {
      this.#again = false;
      await this.#pass();
      await this.o.onPass?.();
    } while (this.#again);
  }

  async #pass(): Promise<void> {
    const batch: SessionLog[] = [];
    let headBytes = 0;
    for (const log of this.#logs.values()) {
      log.current?.checkConversation();
      if (log.dirty) {
        batch.push(log);
        headBytes += CHUNK_HEAD + log.id.length;
      }
    }
    if (batch.length > 0) await this.#write(batch, headBytes);
    // Every acknowledgement of the pass in one burst; a resumed connection learns what an earlier one made durable.
    for (const log of this.#logs.values()) log.ack();
    for (const log of [...this.#logs.values()]) if (log.closing && !log.dirty) this.#forget(log);
    await this.#roll(false);
  }

  /** Writes the batch's records as one chunk per session, in one write and one sync. */
  async #write(batch: SessionLog[], headBytes: number): Promise<void> {
    let seg: OpenSegment;
    try {
      seg = await this.#open();
    } catch (err) {
      for (const log of batch) log.take();
      this.#failed(batch, err);
      return;
    }
    const heads = Buffer.allocUnsafe(headBytes);
    const iov: Uint8Array[] = [];
    let headAt = 0;
    let pos = seg.bytes;
    for (const log of batch) {
      const records = log.take();
      const n = writeChunkHead(heads, headAt, log.id, log.seed, records);
      iov.push(heads.subarray(headAt, headAt + n), records);
      const spans: ChunkSpans = (seg.index.sessions[log.id] ??= []);
      spans.push([pos, n + records.length]);
      headAt += n;
      pos += n + records.length;
      log.lastSeq = seg.seq;
    }
    this.nodeBytes += headBytes;
    try {
      await seg.writer.append(iov);
    } catch (err) {
      // Nothing is acknowledged past a failed write; the segment is left (its tail may be torn) for a new one.
      this.#failed(batch, err);
      await this.#roll(true);
      return;
    }
    seg.bytes = pos;
    seg.index.bytes = pos;
    this.writes++;
    const now = this.o.clock.now();
    for (const log of batch) {
      const since = log.settle();
      if (since >= 0 && log.current?.owner) this.o.metrics?.ackLatencyS?.((now - since) / 1000);
    }
  }

  async #open(): Promise<OpenSegment> {
    if (this.#segment) return this.#segment;
    const name = segmentName(this.o.writer, this.#seq);
    const index: SegmentIndex = { bytes: SEGMENT_HEAD, sessions: {} };
    let writer: SegmentWriter;
    try {
      writer = await this.o.store.createSegment(name, this.o.clock.now());
    } catch (err) {
      this.#seq++; // the next pass tries a segment of its own
      throw err;
    }
    this.#indexes.set(name, index);
    this.nodeBytes += SEGMENT_HEAD;
    this.#segment = { seq: this.#seq, name, writer, bytes: SEGMENT_HEAD, openedAtMs: this.o.clock.now(), index };
    return this.#segment;
  }

  /** Closes the segment when it is old or big enough (or `now`), storing its index beside it. */
  async #roll(now: boolean): Promise<void> {
    const seg = this.#segment;
    if (!seg || (!now && seg.bytes < SEGMENT_MAX_BYTES && this.o.clock.now() - seg.openedAtMs < SEGMENT_MAX_MS)) return;
    this.#segment = undefined;
    this.#seq = seg.seq + 1;
    await seg.writer.close().catch(() => undefined);
    try {
      await this.o.store.writeIndex(seg.name, seg.index);
      this.#indexes.delete(seg.name);
    } catch (err) {
      // Readers read the segment whole instead.
      this.#indexes.delete(seg.name);
      this.o.logger.warn({ segment: seg.name, err: { name: (err as Error)?.name, code: (err as NodeJS.ErrnoException)?.code } }, 'audio log segment index not written');
    }
  }

  #failed(batch: readonly SessionLog[], err: unknown): void {
    // Nothing is acknowledged past a failed write: the client keeps the audio, and the session ends so it resumes.
    this.o.logger.error({ sessions: batch.length, err: { name: (err as Error)?.name, code: (err as NodeJS.ErrnoException)?.code } }, 'audio log write failed');
    for (const log of batch) {
      log.settleFailed();
      log.current?.owner?.close(CloseCode.INTERNAL_ERROR, 'audio log write failed');
    }
  }

  /** Opens a fresh log, or takes over the session's log (here, or from the store). */
  async attach(conn: LogConnection, req: ConnectRequest): Promise<{ log: SessionLog } | { code: number; reason: string }> {
    const id = req.resume?.sessionId ?? req.sessionId;
    const live = this.#logs.get(id);
    if (live?.uid === req.uid) {
      const old = live.current;
      live.epoch++;
      live.current = conn;
      live.closing = false;
      if (old) {
        old.supersede();
        await this.#within(old.done, TAKEOVER_WAIT_MS);
      }
      return { log: live };
    }
    let found: Found | undefined;
    if (req.resume) {
      if (!isLogId(id)) return UNKNOWN;
      // Another user's session, live here or not, is read and answered as an id never issued: a resume never tells
      // that a session exists.
      found = await this.#find(id);
      if (!found || found.header.uid !== req.uid) return UNKNOWN;
      if (this.#logs.has(id)) return this.attach(conn, req); // another connection took it meanwhile
    }
    const from = { writer: this.o.writer, from: this.#segment?.seq ?? this.#seq };
    // After this node's `to` lines, so that each bounds the range it closes.
    await Promise.all(this.#appends);
    if (found) await this.o.store.appendManifest(id, [from], true);
    else {
      const header: AudioLogHeader = { sessionId: id, uid: req.uid, codec: req.codec, sampleRate: req.sampleRate, channels: req.channels, language: req.language, source: req.source, writer: this.o.writer, createdAtMs: this.o.clock.now() };
      await this.o.store.createManifest(id, [{ header }, from]);
    }
    if (this.#logs.has(id)) return this.attach(conn, req);
    const log = new SessionLog(id, req.uid, found?.endMs ?? 0, found?.bytes ?? 0, found?.epoch ?? 0, found?.originWallMs);
    log.current = conn;
    this.#logs.set(id, log);
    return { log };
  }

  async #within(p: Promise<void>, ms: number): Promise<void> {
    let timer: TimerId | undefined;
    await Promise.race([p, new Promise<void>((resolve) => (timer = this.o.scheduler.after(ms, resolve)))]);
    this.o.scheduler.cancel(timer);
  }

  /** Reads a session's log: where its audio ends, its next epoch, its size. */
  async #find(id: string): Promise<Found | undefined> {
    const read = await readSessionLog(this.o.store, id, { liveIndex: (n) => this.liveIndex(n) });
    if (!read) return undefined;
    const h = read.header;
    const f: Found = { header: h, endMs: 0, epoch: 0, bytes: read.bytes };
    for (const run of read.runs) {
      for (const r of run.records) {
        if (r.type === RecordType.AUDIO) f.endMs = Math.max(f.endMs, r.offsetMs + encodedDurationS(h.codec, h.sampleRate, h.channels, r.bytes) * 1000);
        else if (r.mark.kind === 'gap') f.endMs = Math.max(f.endMs, r.mark.toMs);
        else {
          f.epoch = Math.max(f.epoch, r.mark.epoch + 1);
          if (r.mark.kind === 'start') f.originWallMs ??= r.mark.wallMs - r.offsetMs;
        }
      }
    }
    for (const e of read.handedOver) f.epoch = Math.max(f.epoch, e + 1);
    return f;
  }

  /** A connection ended: the log leaves the node once its last records are written (the next pass, asked for now). */
  release(conn: LogConnection): void {
    const log = conn.log;
    if (!log || log.current !== conn) return;
    log.current = undefined;
    log.closing = true;
    void this.pass();
  }

  #forget(log: SessionLog): void {
    if (this.#logs.get(log.id) !== log) return;
    this.#logs.delete(log.id);
    // Bounds the segments a reader of the session looks in; a reader without it looks in every later one.
    if (log.lastSeq < 0) return;
    const p = this.o.store.appendManifest(log.id, [{ writer: this.o.writer, to: log.lastSeq }], false).catch(() => undefined);
    this.#appends.add(p);
    void p.finally(() => this.#appends.delete(p));
  }

  /** Writes every open log and closes the segment (shutdown, after the sessions drained). */
  async close(): Promise<void> {
    this.o.scheduler.cancel(this.#timer);
    for (const log of this.#logs.values()) log.closing = true;
    await this.pass().catch(() => undefined);
    for (const log of [...this.#logs.values()]) this.#forget(log);
    await this.#roll(true);
    await Promise.all(this.#appends);
  }
}
