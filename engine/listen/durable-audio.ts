// Acknowledged audio (ack=enabled): each session's frames go to its audio log, one write and fsync per session per
// pass for the whole node, then `audio_ack` to the client; a reconnect with `resume` continues the session's log.
import type { Clock } from '../clock.js';
import type { Logger } from '../logger.js';
import type { Scheduler, TimerId } from '../scheduler.js';
import { CloseCode, ListenMessage } from '../protocol.js';
import { encodedDurationS } from '../audio/encoded-duration.js';
import { RecordType, encodeMark, encodeRecord, isLogId, parsePart, type AudioLogHeader, type AudioLogMark, type AudioLogPartWriter, type AudioLogStore } from './audio-log.js';

/** One pass a second: a device learns within about a second what it may free, and no frame waits on a disk. */
export const ACK_INTERVAL_MS = 1000;
/**
 * How long a resumed connection waits for the connection it replaces on this node to finish its audio (its words
 * stored) before it continues the conversation: two sessions writing one conversation's tail would overwrite each other.
 */
const TAKEOVER_WAIT_MS = 5000;
/** A frame whose start lies this close below the log's end is taken for the one already logged (rounding of offsets). */
const DEDUPE_SLACK_MS = 0.5;

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
  /** This process (the parts it writes name it; its heartbeat says it lives). */
  writer: string;
  /** Bytes one session's log may hold (all its parts); past it the session closes with 4413. */
  maxSessionBytes: number;
  /** Bytes of audio logs this node holds; past it a session closes with 1013. */
  maxNodeBytes: number;
  /** Bytes of logs already on disk (the sweep measures them): counted against maxNodeBytes. */
  retainedBytes?: () => number;
  /** Called once per pass (the writer's heartbeat). */
  onPass?: () => Promise<void> | void;
  metrics?: { ackLatencyS?(s: number): void; gapSeconds?(s: number): void; bytes?(n: number): void; full?(scope: 'session' | 'node'): void };
  /** @defaultValue ACK_INTERVAL_MS */
  intervalMs?: number;
}

/** The resumed log's state read from its parts. */
interface Found {
  header: AudioLogHeader;
  originWallMs?: number;
  endMs: number;
  epoch: number;
  nextPart: number;
  bytes: number;
}

/** One session's log on this node: its open part, what waits for the next pass, and its current connection. */
class SessionLog {
  readonly id: string;
  readonly uid: string;
  readonly #d: DurableAudio;
  readonly #writer: AudioLogPartWriter;
  #pending: Uint8Array[] = [];
  #pendingBytes = 0;
  /** Session offset (ms) where the audio received so far ends, and where the durable part ends. */
  receivedMs: number;
  durableMs: number;
  /** Bytes of every part of the log, pending included; of them, what this node appended. */
  bytes: number;
  appended = 0;
  epoch: number;
  /** Wall-clock time of session offset 0 (from the first connection's first frame). */
  originWallMs: number | undefined;
  current: LogConnection | undefined;
  /** Receive times of frames not yet durable (ack latency): one per pass is enough, the oldest. */
  #oldestPendingAt = -1;
  #flushing: Promise<void> | undefined;
  #closing: Promise<void> | undefined;

  constructor(d: DurableAudio, id: string, uid: string, writer: AudioLogPartWriter, endMs: number, bytes: number, epoch: number, originWallMs: number | undefined) {
    this.originWallMs = originWallMs;
    this.#d = d;
    this.id = id;
    this.uid = uid;
    this.#writer = writer;
    this.receivedMs = endMs;
    this.durableMs = endMs;
    this.bytes = bytes;
    this.epoch = epoch;
  }

  get dirty(): boolean {
    return this.#pending.length > 0;
  }

  append(record: Uint8Array, endMs: number, at: number): void {
    this.#pending.push(record);
    this.#pendingBytes += record.length;
    this.bytes += record.length;
    this.appended += record.length;
    this.#d.nodeBytes += record.length;
    if (endMs > this.receivedMs) this.receivedMs = endMs;
    if (this.#oldestPendingAt < 0) this.#oldestPendingAt = at;
  }

  mark(offsetMs: number, mark: AudioLogMark): void {
    this.append(encodeMark(offsetMs, mark), 0, -1);
  }

  /** Writes and syncs what waits, then acknowledges it to the current connection. */
  flush(): Promise<void> {
    this.#flushing ??= this.#flush().finally(() => (this.#flushing = undefined));
    return this.#flushing;
  }

  async #flush(): Promise<void> {
    while (this.#pending.length > 0) {
      const chunks = this.#pending;
      const upTo = this.receivedMs;
      const since = this.#oldestPendingAt;
      this.#pending = [];
      this.#pendingBytes = 0;
      this.#oldestPendingAt = -1;
      await this.#writer.append(chunks);
      this.durableMs = upTo;
      if (this.ack() && since >= 0) this.#d.o.metrics?.ackLatencyS?.((this.#d.o.clock.now() - since) / 1000);
    }
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

  get closed(): boolean {
    return this.#closing !== undefined;
  }

  /** Writes what waits and closes the part; once. */
  close(): Promise<void> {
    this.#closing ??= this.flush().finally(() => this.#writer.close());
    return this.#closing;
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
      log.mark(log.receivedMs, { kind: 'gap', epoch: this.epoch, toMs: resumeAt });
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
      log.mark(startMs, { kind: 'start', epoch: this.epoch, wallMs: this.streamStartMs ?? now });
    }
    if (log.bytes + frame.length > d.o.maxSessionBytes) return this.#full('session');
    if (d.nodeBytes + (d.o.retainedBytes?.() ?? 0) + frame.length > d.o.maxNodeBytes) return this.#full('node');
    log.append(encodeRecord(RecordType.AUDIO, startMs, frame), endMs, now);
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
    if (log?.current === this && log.dirty) void log.flush().catch(() => undefined);
  }

  /** Notes the conversation this connection's audio goes into (checked each pass). */
  checkConversation(): void {
    const id = this.owner?.conversationId();
    if (id === undefined || id === this.#conversationId || !this.#started || !this.log) return;
    this.#conversationId = id;
    this.log.mark(this.#nextMs, { kind: 'conversation', epoch: this.epoch, conversationId: id, wallMs: this.#d.o.clock.now() });
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
    if (done && this.#started) log.mark(this.#nextMs, { kind: 'end', epoch: this.epoch });
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
  /** Bytes appended by this node's open logs. */
  nodeBytes = 0;
  /** Frames dropped as duplicates on resume (tests, metrics). */
  duplicates = 0;

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

  dropped(): boolean {
    this.duplicates++;
    return false;
  }

  /**
   * One pass: every log with new records is written and synced (in parallel), then acknowledged. A pass asked for
   * while one runs follows it, so records appended meanwhile wait one pass at most.
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
      const flushes: Promise<void>[] = [];
      for (const log of this.#logs.values()) {
        log.current?.checkConversation();
        if (log.dirty) flushes.push(log.flush().catch((err: unknown) => this.#flushFailed(log, err)));
        else log.ack(); // a resumed connection learns what an earlier one made durable
      }
      await Promise.all(flushes);
      await this.o.onPass?.();
    } while (this.#again);
  }

  #flushFailed(log: SessionLog, err: unknown): void {
    // Nothing is acknowledged past a failed write: the client keeps the audio, and the session ends so it resumes.
    this.o.logger.error({ sessionId: log.id, err: { name: (err as Error)?.name, code: (err as NodeJS.ErrnoException)?.code } }, 'audio log write failed');
    log.current?.owner?.close(CloseCode.INTERNAL_ERROR, 'audio log write failed');
  }

  /** Opens a fresh log, or takes over the session's log (here, or from its parts in the store). */
  async attach(conn: LogConnection, req: ConnectRequest): Promise<{ log: SessionLog } | { code: number; reason: string }> {
    const id = req.resume?.sessionId ?? req.sessionId;
    const live = this.#logs.get(id);
    if (live && !live.closed) {
      if (live.uid !== req.uid) return { code: CloseCode.RESUME_REFUSED, reason: 'session belongs to another user' };
      const old = live.current;
      live.epoch++;
      live.current = conn;
      if (old) {
        old.supersede();
        await this.#within(old.done, TAKEOVER_WAIT_MS);
      }
      return { log: live };
    }
    let found: Found | undefined;
    if (req.resume) {
      if (!isLogId(id)) return { code: CloseCode.UNKNOWN_SESSION, reason: 'unknown session' };
      // A log still closing here is read back once its last records are on disk.
      if (live) {
        await live.close().catch(() => undefined);
        this.#forget(live);
      }
      found = await this.#find(id);
      if (!found) return { code: CloseCode.UNKNOWN_SESSION, reason: 'unknown session' };
      if (found.header.uid !== req.uid) return { code: CloseCode.RESUME_REFUSED, reason: 'session belongs to another user' };
      if (this.#logs.has(id)) return this.attach(conn, req); // another connection took it meanwhile
    }
    const header: AudioLogHeader = { sessionId: id, uid: req.uid, codec: req.codec, sampleRate: req.sampleRate, channels: req.channels, language: req.language, source: req.source, writer: this.o.writer, createdAtMs: this.o.clock.now() };
    const writer = await this.o.store.create(id, found?.nextPart ?? 0, header);
    const log = new SessionLog(this, id, req.uid, writer, found?.endMs ?? 0, found?.bytes ?? 0, found?.epoch ?? 0, found?.originWallMs);
    log.current = conn;
    this.#logs.set(id, log);
    return { log };
  }

  async #within(p: Promise<void>, ms: number): Promise<void> {
    let timer: TimerId | undefined;
    await Promise.race([p, new Promise<void>((resolve) => (timer = this.o.scheduler.after(ms, resolve)))]);
    this.o.scheduler.cancel(timer);
  }

  /** Reads a session's parts (cutting a torn tail): where its audio ends, its next epoch and part number. */
  async #find(id: string): Promise<Found | undefined> {
    const parts = await this.o.store.parts(id);
    let found: Found | undefined;
    for (const n of parts) {
      const raw = await this.o.store.read(id, n);
      const p = raw && parsePart(raw);
      if (!p) continue;
      if (p.tornBytes > 0) await this.o.store.cutTorn(id, n, p.validBytes);
      const h = p.header;
      const f: Found = found ?? { header: h, endMs: 0, epoch: 0, nextPart: 0, bytes: 0 };
      f.nextPart = n + 1;
      f.bytes += p.validBytes;
      for (const r of p.records) {
        if (r.type === RecordType.AUDIO) f.endMs = Math.max(f.endMs, r.offsetMs + encodedDurationS(h.codec, h.sampleRate, h.channels, r.bytes) * 1000);
        else if (r.mark.kind === 'gap') f.endMs = Math.max(f.endMs, r.mark.toMs);
        else {
          f.epoch = Math.max(f.epoch, r.mark.epoch + 1);
          if (r.mark.kind === 'start') f.originWallMs ??= r.mark.wallMs - r.offsetMs;
        }
      }
      found = f;
    }
    return found;
  }

  /** A connection ended: the log closes once no connection writes to it. */
  release(conn: LogConnection): void {
    const log = conn.log;
    if (!log || log.current !== conn) return;
    log.current = undefined;
    void log.close().then(
      () => this.#forget(log),
      (err: unknown) => {
        this.#forget(log);
        this.#flushFailed(log, err);
      },
    );
  }

  #forget(log: SessionLog): void {
    if (this.#logs.get(log.id) !== log) return;
    this.#logs.delete(log.id);
    this.nodeBytes -= log.appended;
  }

  /** Writes every open log (shutdown, after the sessions drained). */
  async close(): Promise<void> {
    this.o.scheduler.cancel(this.#timer);
    await Promise.allSettled([...this.#logs.values()].map((l) => l.close()));
    this.#logs.clear();
  }
}
