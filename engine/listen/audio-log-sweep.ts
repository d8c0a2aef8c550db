// The audio logs' sweep, at start-up and every half minute: audio a connection logged but never finished (its node
// died, or it never reached a speech engine) goes to kept audio; a log past its retention, or whose conversation is
// gone, is deleted.
import type { Logger } from '../logger.js';
import { ConversationStatus } from '../protocol.js';
import { encodedDurationS } from '../audio/encoded-duration.js';
import { RecordType, encodeMark, parsePart, type AudioLogHeader, type AudioLogStore, type LogRecord, type StoredPart } from './audio-log.js';

export const SWEEP_INTERVAL_MS = 30_000;

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
  /** Whether another process that wrote a part still lives (its heartbeat). */
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

export class AudioLogSweep {
  readonly #o: AudioLogSweepOptions;
  #running: Promise<void> | undefined;
  /** Bytes of the logs on disk not open here, at the last sweep (they count against the node's bound). */
  retainedBytes = 0;

  constructor(o: AudioLogSweepOptions) {
    this.#o = o;
  }

  run(): Promise<void> {
    this.#running ??= this.#run().finally(() => (this.#running = undefined));
    return this.#running;
  }

  async #run(): Promise<void> {
    const bySession = new Map<string, StoredPart[]>();
    for (const p of await this.#o.store.list()) {
      if (this.#o.isOpen(p.sessionId)) continue;
      const list = bySession.get(p.sessionId) ?? [];
      list.push(p);
      bySession.set(p.sessionId, list);
    }
    let retained = 0;
    for (const [id, parts] of bySession) {
      try {
        if (!(await this.#sweep(id, parts))) retained += parts.reduce((n, p) => n + p.bytes, 0);
      } catch (err) {
        this.#o.logger.error({ sessionId: id, err: { name: (err as Error)?.name, code: (err as NodeJS.ErrnoException)?.code } }, 'audio log sweep failed');
        retained += parts.reduce((n, p) => n + p.bytes, 0);
      }
    }
    this.retainedBytes = retained;
  }

  /** Hands over what died, then deletes the log when it may go; true when it was deleted. */
  async #sweep(id: string, stored: StoredPart[]): Promise<boolean> {
    const o = this.#o;
    let header: AudioLogHeader | undefined;
    const epochs = new Map<number, Epoch>();
    const handed = new Set<number>();
    const conversations = new Set<string>();
    for (const { part } of stored) {
      const raw = await o.store.read(id, part);
      const p = raw && parsePart(raw);
      if (!p) continue;
      if (p.tornBytes > 0 && !(await o.writerAlive(p.header.writer))) await o.store.cutTorn(id, part, p.validBytes);
      header ??= p.header;
      collect(p.header.writer, p.records, epochs, handed, conversations);
    }
    if (!header) return false;
    let open = false;
    for (const e of epochs.values()) {
      if (e.finished || handed.has(e.epoch)) continue;
      if ((e.writer !== o.writer && (await o.writerAlive(e.writer))) || !(await o.claim(id, e.epoch))) {
        open = true;
        continue;
      }
      await this.#handOver(id, header, e, stored);
      if (e.conversationId) conversations.add(e.conversationId);
    }
    if (open) return false;
    const lastWriteMs = Math.max(...stored.map((p) => p.modifiedMs));
    let gone = conversations.size > 0;
    let settled = true;
    for (const c of conversations) {
      const row = await o.conversations.getById(c);
      if (row && !row.deleted) gone = false;
      if (row && !row.deleted && !SETTLED.has(row.status)) settled = false;
    }
    const reason = gone ? 'conversation_gone' : settled && o.now() - lastWriteMs >= o.retentionMs ? 'retention' : undefined;
    if (!reason) return false;
    await o.store.remove(id);
    o.metrics?.removed?.(reason);
    o.logger.debug({ sessionId: id, reason }, 'audio log deleted');
    return true;
  }

  /**
   * A dead connection's audio after what its conversation already holds (the end of the last segment stored since
   * the connection began) becomes kept audio; a mark in a part of this process's records it.
   */
  async #handOver(id: string, h: AudioLogHeader, e: Epoch, stored: StoredPart[]): Promise<void> {
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
    const part = Math.max(...stored.map((p) => p.part)) + 1;
    const w = await o.store.create(id, part, { ...h, writer: o.writer, createdAtMs: o.now() });
    try {
      await w.append([encodeMark(e.startOffsetMs, { kind: 'handed_over', epoch: e.epoch })]);
    } finally {
      await w.close();
    }
    stored.push({ sessionId: id, part, bytes: 0, modifiedMs: o.now() });
    o.metrics?.handedOverSeconds?.(keptS);
    o.logger.warn({ sessionId: id, epoch: e.epoch, keptS: Math.round(keptS * 1000) / 1000 }, 'audio of a connection that did not finish handed to kept audio');
  }
}

/** Sorts a part's records into connections: audio belongs to the connection whose start precedes it in the part. */
function collect(writer: string, records: readonly LogRecord[], epochs: Map<number, Epoch>, handed: Set<number>, conversations: Set<string>): void {
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
      case 'handed_over':
        handed.add(m.epoch);
        break;
      case 'gap':
        break;
    }
  }
}
