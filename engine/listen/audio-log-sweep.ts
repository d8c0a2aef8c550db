// The audio logs' sweep, at start-up and every half minute: audio a connection logged but never finished (its node
// died, or it never reached a speech engine) goes to kept audio; a log past its retention, or whose conversation is
// gone, is deleted, and a segment once no session it holds chunks of still has a log.
import type { Logger } from '../logger.js';
import { ConversationStatus } from '../protocol.js';
import { encodedDurationS } from '../audio/encoded-duration.js';
import { RecordType, indexOf, parseSegment, readSessionLog, type AudioLogHeader, type AudioLogStore, type LogRecord, type SegmentIndex, type StoredManifest, type StoredSegment } from './audio-log.js';

export const SWEEP_INTERVAL_MS = 30_000;
/** A log whose manifest has not changed for this long is remembered rather than read again each sweep. */
const QUIET_AFTER_MS = 60_000;

/** Where kept audio from a log lands, and what it is. */
export interface LogHandOver {
  header: AudioLogHeader;
  conversationId: string;
  /** The connection's number within the session (kept audio is named by it). */
  epoch: number;
  /** Conversation time of the first frame's start, in seconds. */
  offsetS: number;
  frames: Uint8Array[];
}

export interface AudioLogSweepOptions {
  store: AudioLogStore;
  logger: Logger;
  now: () => number;
  /** This process's writer id. */
  writer: string;
  retentionMs: number;
  /** Whether this node has the session's log open (never swept). */
  isOpen: (logId: string) => boolean;
  /** The index of a segment this process writes now (its own current one). */
  liveIndex?: (name: string) => SegmentIndex | undefined;
  /** The segment this process writes now (never deleted). */
  currentSegment?: () => string | undefined;
  /** One of this process's segments was deleted (its bytes no longer count against the node's bound). */
  removedOwn?: (bytes: number) => void;
  /** Whether another process that wrote a segment still lives (its heartbeat). */
  writerAlive: (writer: string) => Promise<boolean>;
  /** Takes the hand-over of one connection's audio for this process (at most one process wins it). */
  claim: (logId: string, epoch: number) => Promise<boolean>;
  conversations: {
    getById(id: string): Promise<{ status: string; deleted: boolean; startedAt: string } | undefined>;
    segments(id: string): Promise<readonly { start: number; end: number }[]>;
  };
  /** Opens a conversation for audio that never had one (the connection died before its first step). */
  openConversation: (h: AudioLogHeader, startedAtMs: number) => Promise<string>;
  /** Decodes the frames and schedules their transcription into the conversation (kept audio). */
  keep: (h: LogHandOver) => Promise<void>;
  metrics?: { handedOverSeconds?(s: number): void; removed?(reason: 'retention' | 'conversation_gone'): void };
}

/** One connection's part of a log: its start, its conversation, its frames, and whether it finished. */
interface Epoch {
  epoch: number;
  startOffsetMs: number;
  wallMs: number;
  writer: string;
  conversationId?: string;
  frames: { offsetMs: number; bytes: Uint8Array }[];
  finished: boolean;
}

const SETTLED = new Set<string>([ConversationStatus.COMPLETED, ConversationStatus.FAILED]);

/** A log no connection writes to: what its retention depends on. */
interface Quiet {
  /** Its manifest's modification time when read (a resume or a hand-over changes it). */
  modifiedMs: number;
  conversations: string[];
  lastWriteMs: number;
}

export class AudioLogSweep {
  readonly #o: AudioLogSweepOptions;
  #running: Promise<void> | undefined;
  /** Bytes of other writers' segments on disk at the last sweep (they count against the node's bound). */
  retainedBytes = 0;
  /** Logs read back whole once, not again each sweep while their manifest is unchanged. */
  readonly #quiet = new Map<string, Quiet>();

  constructor(o: AudioLogSweepOptions) {
    this.#o = o;
  }

  run(): Promise<void> {
    this.#running ??= this.#run().finally(() => (this.#running = undefined));
    return this.#running;
  }

  async #run(): Promise<void> {
    const o = this.#o;
    const segments = await o.store.segments();
    const kept = new Set<string>();
    const manifests = await o.store.manifests();
    const listed = new Set(manifests.map((m) => m.sessionId));
    for (const id of this.#quiet.keys()) if (!listed.has(id)) this.#quiet.delete(id);
    for (const m of manifests) {
      if (o.isOpen(m.sessionId)) {
        kept.add(m.sessionId);
        continue;
      }
      try {
        if (!(await this.#sweep(m, segments))) kept.add(m.sessionId);
      } catch (err) {
        kept.add(m.sessionId);
        o.logger.error({ sessionId: m.sessionId, err: { name: (err as Error)?.name, code: (err as NodeJS.ErrnoException)?.code } }, 'audio log sweep failed');
      }
    }
    this.retainedBytes = await this.#segments(segments, kept);
    for (const l of (await o.store.legacy?.()) ?? []) if (o.now() - l.modifiedMs >= o.retentionMs) await o.store.removeLegacy?.(l.sessionId);
  }

  /**
   * Deletes each segment none of whose sessions still has a log (or is being opened here); returns the bytes of other
   * writers' segments left. A segment another live writer may still append to, or this process's current one, stays.
   */
  async #segments(segments: readonly StoredSegment[], kept: ReadonlySet<string>): Promise<number> {
    const o = this.#o;
    const latest = new Map<string, number>();
    for (const s of segments) latest.set(s.writer, Math.max(latest.get(s.writer) ?? -1, s.seq));
    const alive = new Map<string, boolean>();
    let retained = 0;
    for (const s of segments) {
      const own = s.writer === o.writer;
      const keep = (): void => void (own ? undefined : (retained += s.bytes));
      try {
        if (own && (s.name === o.currentSegment?.() || o.liveIndex?.(s.name))) {
          keep();
          continue;
        }
        let idx = await o.store.readIndex(s.name);
        if (!idx && !own) {
          if (!alive.has(s.writer)) alive.set(s.writer, await o.writerAlive(s.writer));
          // A live writer's newest segment may still grow: a session not in it yet may be soon.
          if (alive.get(s.writer) && s.seq === latest.get(s.writer)) {
            keep();
            continue;
          }
        }
        if (!idx) {
          // Closed without its index (its writer died, or the index write failed): read whole, indexed once.
          const raw = await o.store.readSegment(s.name);
          const p = raw && parseSegment(raw);
          idx = p ? indexOf(p) : { bytes: 0, sessions: {} };
          if (p) await o.store.writeIndex(s.name, idx);
        }
        if (Object.keys(idx.sessions).some((id) => kept.has(id) || o.isOpen(id))) {
          keep();
          continue;
        }
        // A log created after the listing may have entered this segment only if it is the newest of a live writer.
        await o.store.removeSegment(s.name);
        if (own) o.removedOwn?.(s.bytes);
        o.logger.debug({ segment: s.name }, 'audio log segment deleted');
      } catch (err) {
        keep();
        o.logger.error({ segment: s.name, err: { name: (err as Error)?.name, code: (err as NodeJS.ErrnoException)?.code } }, 'audio log segment sweep failed');
      }
    }
    return retained;
  }

  /** Hands over what died, then deletes the log when it may go; true when it was deleted. */
  async #sweep(m: StoredManifest, segments: readonly StoredSegment[]): Promise<boolean> {
    const o = this.#o;
    const id = m.sessionId;
    const quiet = this.#quiet.get(id);
    const known = quiet?.modifiedMs === m.modifiedMs ? quiet : await this.#read(m, segments);
    if (known === undefined) return false;
    if (known === 'removed') return true;
    let gone = known.conversations.length > 0;
    let settled = true;
    for (const c of known.conversations) {
      const row = await o.conversations.getById(c);
      if (row && !row.deleted) gone = false;
      if (row && !row.deleted && !SETTLED.has(row.status)) settled = false;
    }
    const reason = gone ? 'conversation_gone' : settled && o.now() - known.lastWriteMs >= o.retentionMs ? 'retention' : undefined;
    if (!reason) return false;
    await o.store.removeManifest(id);
    this.#quiet.delete(id);
    o.metrics?.removed?.(reason);
    o.logger.debug({ sessionId: id, reason }, 'audio log deleted');
    return true;
  }

  /**
   * Reads a log, handing over what died; what retention needs of it once no connection of it is open (remembered
   * until its manifest changes), undefined while one is, 'removed' when it was an empty manifest past the retention.
   */
  async #read(m: StoredManifest, segments: readonly StoredSegment[]): Promise<Quiet | 'removed' | undefined> {
    const o = this.#o;
    const id = m.sessionId;
    this.#quiet.delete(id);
    const read = await readSessionLog(o.store, id, { segments, ...(o.liveIndex ? { liveIndex: o.liveIndex } : {}) });
    if (!read) {
      // A manifest without its header (a crash while it was created) names no audio: it goes after the retention.
      if (o.now() - m.modifiedMs < o.retentionMs) return undefined;
      await o.store.removeManifest(id);
      return 'removed';
    }
    const header = read.header;
    const epochs = new Map<number, Epoch>();
    const conversations = new Set<string>();
    for (const run of read.runs) collect(run.writer, run.records, epochs, conversations);
    let open = false;
    for (const e of epochs.values()) {
      if (e.finished || read.handedOver.has(e.epoch)) continue;
      if ((e.writer !== o.writer && (await o.writerAlive(e.writer))) || !(await o.claim(id, e.epoch))) {
        open = true;
        continue;
      }
      await this.#handOver(id, header, e);
      if (e.conversationId) conversations.add(e.conversationId);
    }
    if (open) return undefined;
    const q: Quiet = { modifiedMs: m.modifiedMs, conversations: [...conversations], lastWriteMs: Math.max(read.lastWriteMs, m.modifiedMs) };
    // A connection that just attached (its manifest line written) may not have written its start yet.
    if (o.now() - m.modifiedMs >= QUIET_AFTER_MS) this.#quiet.set(id, q);
    return q;
  }

  /**
   * A dead connection's audio after what its conversation already holds (the end of the last segment stored since
   * the connection began) becomes kept audio; a line in the session's manifest records it.
   */
  async #handOver(id: string, h: AudioLogHeader, e: Epoch): Promise<void> {
    const o = this.#o;
    let conversationId = e.conversationId;
    let startedAtMs: number | undefined;
    if (conversationId) {
      const c = await o.conversations.getById(conversationId);
      if (c && !c.deleted) startedAtMs = Date.parse(c.startedAt);
      else conversationId = undefined;
    }
    if (conversationId === undefined || startedAtMs === undefined) {
      if (e.frames.length === 0) conversationId = undefined;
      else {
        conversationId = await o.openConversation(h, e.wallMs);
        startedAtMs = e.wallMs;
      }
    }
    let keptS = 0;
    if (conversationId !== undefined && startedAtMs !== undefined) {
      // Conversation time of the connection's stream time 0.
      const baseS = (e.wallMs - startedAtMs) / 1000;
      let answeredMs = e.startOffsetMs;
      for (const s of await o.conversations.segments(conversationId)) {
        if (s.start >= baseS) answeredMs = Math.max(answeredMs, e.startOffsetMs + (s.end - baseS) * 1000);
      }
      const frames = e.frames.filter((f) => f.offsetMs + encodedDurationS(h.codec, h.sampleRate, h.channels, f.bytes) * 1000 > answeredMs);
      if (frames.length > 0) {
        const first = frames[0]!.offsetMs;
        await o.keep({ header: h, conversationId, epoch: e.epoch, offsetS: baseS + (first - e.startOffsetMs) / 1000, frames: frames.map((f) => f.bytes) });
        keptS = frames.reduce((n, f) => n + encodedDurationS(h.codec, h.sampleRate, h.channels, f.bytes), 0);
      }
    }
    await o.store.appendManifest(id, [{ handedOver: e.epoch }], true);
    o.metrics?.handedOverSeconds?.(keptS);
    o.logger.warn({ sessionId: id, epoch: e.epoch, keptS: Math.round(keptS * 1000) / 1000 }, 'audio of a connection that did not finish handed to kept audio');
  }
}

/** Sorts a writer's records into connections: audio belongs to the connection whose start precedes it. */
function collect(writer: string, records: readonly LogRecord[], epochs: Map<number, Epoch>, conversations: Set<string>): void {
  let cur: Epoch | undefined;
  for (const r of records) {
    if (r.type === RecordType.AUDIO) {
      cur?.frames.push({ offsetMs: r.offsetMs, bytes: r.bytes });
      continue;
    }
    const m = r.mark;
    switch (m.kind) {
      case 'start':
        cur = { epoch: m.epoch, startOffsetMs: r.offsetMs, wallMs: m.wallMs, writer, frames: [], finished: false };
        epochs.set(m.epoch, cur);
        break;
      case 'conversation': {
        const e = epochs.get(m.epoch);
        if (e) e.conversationId = m.conversationId;
        conversations.add(m.conversationId);
        break;
      }
      case 'end': {
        const e = epochs.get(m.epoch);
        if (e) e.finished = true;
        break;
      }
      case 'gap':
        break;
    }
  }
}
