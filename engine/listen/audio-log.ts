// Audio logs (ack=enabled): the frames devices sent, as received, with their session offsets. Each listen process
// appends every session's new records to one segment file of its own per write pass (one write, one sync for the
// node); a per-session manifest names the header and the segments holding the session's chunks.
import { crc32 } from 'node:zlib';
import { constants, mkdir, open, readdir, readFile, rename, rm, stat, writeFile, type FileHandle } from 'node:fs/promises';
import path from 'node:path';

/** `WBAS`: the first four bytes of every segment. */
const SEGMENT_MAGIC = 0x53414257;
/** `WBAC`: the first four bytes of every chunk. */
const CHUNK_MAGIC = 0x43414257;
const VERSION = 2;
/** magic u32, version u8, 3 reserved, creation time f64 (epoch ms). */
export const SEGMENT_HEAD = 16;
/** magic u32, records length u32, CRC-32 u32 of the session id and the records, id length u8, 3 reserved; then the id. */
export const CHUNK_HEAD = 16;
/** type u8, 3 reserved, payload length u32, session offset f64 (ms); then the payload. */
export const RECORD_HEAD = 16;

export const RecordType = {
  /** One frame as the device sent it; the offset is where its audio starts. */
  AUDIO: 1,
  /** A JSON mark (AudioLogMark): a connection's start and end, a gap, its conversation. */
  MARK: 2,
} as const;

/** What the session's manifest says of it, written once when the session's log is created. */
export interface AudioLogHeader {
  sessionId: string;
  uid: string;
  codec: string;
  sampleRate: number;
  channels: number;
  language: string;
  /** The conversation source the session records with (a crashed connection's audio may have to open one). */
  source: string;
  /** The node process that created the log. */
  writer: string;
  createdAtMs: number;
}

/**
 * `start`: a connection began writing (epoch counts them across the session); `conversation`: its audio goes into
 * this conversation, stream time 0 being `wallMs`; `end`: everything that connection received reached a provider or
 * was kept; `gap`: the client resumed past the log's end, audio `[offsetMs, toMs)` never arrived.
 */
export type AudioLogMark =
  | { kind: 'start'; epoch: number; wallMs: number }
  | { kind: 'conversation'; epoch: number; conversationId: string; wallMs: number }
  | { kind: 'end'; epoch: number }
  | { kind: 'gap'; epoch: number; toMs: number };

export interface AudioRecord {
  type: typeof RecordType.AUDIO;
  offsetMs: number;
  bytes: Uint8Array;
}
export interface MarkRecord {
  type: typeof RecordType.MARK;
  offsetMs: number;
  mark: AudioLogMark;
}
export type LogRecord = AudioRecord | MarkRecord;

/**
 * A line of a session's manifest (JSON, one a line, appended): the header first; `from`: a writer began writing the
 * session's chunks, in its segments numbered from `from` on; `to`: that writer's last segment holding them (absent
 * after a crash: every later segment of the writer may hold some); `handedOver`: a dead connection's audio went to
 * kept audio.
 */
export type ManifestLine = { header: AudioLogHeader } | { writer: string; from: number } | { writer: string; to: number } | { handedOver: number };

/** Where one session's chunks lie in a segment: `[position, length]` pairs in write order. */
export type ChunkSpans = [number, number][];

/** A segment's table of contents: each session's chunks; `bytes` the length holding whole, checked chunks. */
export interface SegmentIndex {
  bytes: number;
  sessions: Record<string, ChunkSpans>;
}

const SAFE_ID = /^[A-Za-z0-9_-]{1,100}$/;

/** Whether `id` can name a session's log (a UUID does). */
export function isLogId(id: string): boolean {
  return SAFE_ID.test(id);
}

/** A segment's file name: its writer and its number. */
export function segmentName(writer: string, seq: number): string {
  return `${writer}.${String(seq).padStart(6, '0')}`;
}

export function parseSegmentName(name: string): { writer: string; seq: number } | undefined {
  const m = /^([A-Za-z0-9_-]{1,100})\.(\d{6,})$/.exec(name);
  return m ? { writer: m[1]!, seq: Number(m[2]) } : undefined;
}

export function encodeSegmentHead(createdAtMs: number): Uint8Array {
  const out = Buffer.alloc(SEGMENT_HEAD);
  out.writeUInt32LE(SEGMENT_MAGIC, 0);
  out.writeUInt8(VERSION, 4);
  out.writeDoubleLE(createdAtMs, 8);
  return out;
}

/**
 * Records of one session, encoded into a buffer it reuses: the hot path copies a frame after a 16-byte head and
 * allocates only when the buffer grows. The chunk's checksum is computed once, when the pass writes it.
 */
export class RecordBuffer {
  #buf: Buffer;
  length = 0;

  constructor(initialBytes = 4096) {
    this.#buf = Buffer.allocUnsafe(initialBytes);
  }

  /** Appends one record. */
  push(type: number, offsetMs: number, payload: Uint8Array): number {
    const need = this.length + RECORD_HEAD + payload.length;
    if (need > this.#buf.length) {
      const bigger = Buffer.allocUnsafe(Math.max(need, this.#buf.length * 2));
      this.#buf.copy(bigger, 0, 0, this.length);
      this.#buf = bigger;
    }
    const b = this.#buf;
    const at = this.length;
    b.writeUInt32LE(type, at);
    b.writeUInt32LE(payload.length, at + 4);
    b.writeDoubleLE(offsetMs, at + 8);
    b.set(payload, at + RECORD_HEAD);
    this.length = need;
    return RECORD_HEAD + payload.length;
  }

  mark(offsetMs: number, mark: AudioLogMark): number {
    return this.push(RecordType.MARK, offsetMs, Buffer.from(JSON.stringify(mark), 'utf8'));
  }

  /** The records held (a view: valid until the next push or clear). */
  view(): Buffer {
    return this.#buf.subarray(0, this.length);
  }

  clear(): void {
    this.length = 0;
  }
}

/** The checksum a chunk of `sessionId` starts from (computed once per session). */
export function chunkSeed(sessionId: string): number {
  return crc32(Buffer.from(sessionId, 'latin1'));
}

/** Writes a chunk's head for `records` at `out[at]`; returns its length. */
export function writeChunkHead(out: Buffer, at: number, sessionId: string, seed: number, records: Uint8Array): number {
  out.writeUInt32LE(CHUNK_MAGIC, at);
  out.writeUInt32LE(records.length, at + 4);
  out.writeUInt32LE(crc32(records, seed), at + 8);
  out.writeUInt32LE(sessionId.length, at + 12);
  out.write(sessionId, at + CHUNK_HEAD, 'latin1');
  return CHUNK_HEAD + sessionId.length;
}

/** A whole chunk (head and records), for tests and one-off writes. */
export function encodeChunk(sessionId: string, records: Uint8Array): Buffer {
  const out = Buffer.allocUnsafe(CHUNK_HEAD + sessionId.length + records.length);
  const n = writeChunkHead(out, 0, sessionId, chunkSeed(sessionId), records);
  out.set(records, n);
  return out;
}

/** One chunk found in a segment: whose, where, and its records' bytes. */
export interface Chunk {
  sessionId: string;
  at: number;
  length: number;
  records: Uint8Array;
}

/** Reads the chunk at `at` of `b`; undefined when it is not whole or its checksum fails (a torn tail). */
export function readChunk(b: Buffer, at: number): Chunk | undefined {
  if (at + CHUNK_HEAD > b.length || b.readUInt32LE(at) !== CHUNK_MAGIC) return undefined;
  const len = b.readUInt32LE(at + 4);
  const idLen = b.readUInt32LE(at + 12);
  if (idLen === 0 || idLen > 100) return undefined;
  const start = at + CHUNK_HEAD + idLen;
  if (start + len > b.length) return undefined;
  const id = b.subarray(at + CHUNK_HEAD, start);
  const records = b.subarray(start, start + len);
  if (crc32(records, crc32(id)) !== b.readUInt32LE(at + 8)) return undefined;
  return { sessionId: id.toString('latin1'), at, length: CHUNK_HEAD + idLen + len, records };
}

/** A segment read back: its chunks in order, and the bytes after the last whole one (a tail torn by a crash). */
export interface ParsedSegment {
  createdAtMs: number;
  chunks: Chunk[];
  validBytes: number;
  tornBytes: number;
}

/** Reads a segment; undefined when even its head is not whole (a crash just after it was created). */
export function parseSegment(buf: Uint8Array): ParsedSegment | undefined {
  const b = Buffer.from(buf.buffer, buf.byteOffset, buf.byteLength);
  if (b.length < SEGMENT_HEAD || b.readUInt32LE(0) !== SEGMENT_MAGIC || b.readUInt8(4) !== VERSION) return undefined;
  const chunks: Chunk[] = [];
  let at = SEGMENT_HEAD;
  for (let c = readChunk(b, at); c; c = readChunk(b, at)) {
    chunks.push(c);
    at += c.length;
  }
  return { createdAtMs: b.readDoubleLE(8), chunks, validBytes: at, tornBytes: b.length - at };
}

export function indexOf(p: ParsedSegment): SegmentIndex {
  const sessions: Record<string, ChunkSpans> = {};
  for (const c of p.chunks) (sessions[c.sessionId] ??= []).push([c.at, c.length]);
  return { bytes: p.validBytes, sessions };
}

/** A chunk's records; a damaged record ends them (it cannot happen past a checked chunk, but a reader never trusts). */
export function parseRecords(buf: Uint8Array): LogRecord[] {
  const b = Buffer.from(buf.buffer, buf.byteOffset, buf.byteLength);
  const out: LogRecord[] = [];
  let at = 0;
  while (at + RECORD_HEAD <= b.length) {
    const type = b.readUInt32LE(at);
    const len = b.readUInt32LE(at + 4);
    if ((type !== RecordType.AUDIO && type !== RecordType.MARK) || at + RECORD_HEAD + len > b.length) break;
    const payload = b.subarray(at + RECORD_HEAD, at + RECORD_HEAD + len);
    const offsetMs = b.readDoubleLE(at + 8);
    if (type === RecordType.AUDIO) out.push({ type, offsetMs, bytes: payload });
    else {
      try {
        out.push({ type, offsetMs, mark: JSON.parse(payload.toString('utf8')) as AudioLogMark });
      } catch {
        break;
      }
    }
    at += RECORD_HEAD + len;
  }
  return out;
}

/** A manifest's lines; a line torn by a crash (the last one) is skipped. */
export function parseManifest(text: string): ManifestLine[] {
  const out: ManifestLine[] = [];
  for (const line of text.split('\n')) {
    if (line.length === 0) continue;
    try {
      out.push(JSON.parse(line) as ManifestLine);
    } catch {
      // torn
    }
  }
  return out;
}

/** The segment being written: each pass appends and resolves once it is durable. */
export interface SegmentWriter {
  /** Writes `chunks` after what the segment holds and makes them durable (one write, then fsync). */
  append(chunks: readonly Uint8Array[]): Promise<void>;
  close(): Promise<void>;
}

export interface StoredSegment {
  name: string;
  writer: string;
  seq: number;
  bytes: number;
  /** Last write, epoch ms. */
  modifiedMs: number;
}

export interface StoredManifest {
  sessionId: string;
  modifiedMs: number;
}

/**
 * Where audio logs live. The local implementation keeps files under DATA_DIR/audio-log/; an object store fits the
 * same seam: a segment becomes a prefix and each pass's append one object (objects are written whole, so an upload
 * is durable once acknowledged), a manifest likewise.
 */
export interface AudioLogStore {
  /** Creates the session's manifest with `lines`, durably; fails (EEXIST) when the session has one. */
  createManifest(sessionId: string, lines: readonly ManifestLine[]): Promise<void>;
  /** Appends lines to the session's manifest; durably when `sync`. */
  appendManifest(sessionId: string, lines: readonly ManifestLine[], sync: boolean): Promise<void>;
  /** The session's manifest lines; undefined when it has none. */
  manifest(sessionId: string): Promise<ManifestLine[] | undefined>;
  manifests(): Promise<StoredManifest[]>;
  removeManifest(sessionId: string): Promise<void>;
  /** Creates a segment; fails (EEXIST) when it exists. */
  createSegment(name: string, createdAtMs: number): Promise<SegmentWriter>;
  segments(): Promise<StoredSegment[]>;
  readSegment(name: string): Promise<Uint8Array | undefined>;
  /** Bytes `[at, at + length)` of each span, in order; undefined when the segment is gone. */
  readSpans(name: string, spans: ChunkSpans): Promise<Uint8Array[] | undefined>;
  /** The index a closed segment keeps beside it; undefined when it has none (still written, or its writer died). */
  readIndex(name: string): Promise<SegmentIndex | undefined>;
  writeIndex(name: string, index: SegmentIndex): Promise<void>;
  /** Deletes a segment and its index. */
  removeSegment(name: string): Promise<void>;
  /** Logs of the earlier layout (a directory of parts per session): never read, deleted after the retention. */
  legacy?(): Promise<StoredManifest[]>;
  removeLegacy?(sessionId: string): Promise<void>;
}

/**
 * Writes every byte of `chunks` at the file's end. A short write is no error by itself (a disk that filled up mid-way
 * takes part of it): the rest is written again, which then fails with the cause, so nothing unwritten is acknowledged.
 */
async function writeAll(fh: FileHandle, chunks: readonly Uint8Array[]): Promise<void> {
  const total = chunks.reduce((n, c) => n + c.byteLength, 0);
  let done = (await fh.writev(chunks as Uint8Array[])).bytesWritten;
  if (done >= total) return;
  const all = Buffer.concat(chunks as Uint8Array[]);
  while (done < total) {
    const { bytesWritten } = await fh.write(all, done, total - done);
    if (bytesWritten === 0) throw Object.assign(new Error('audio log write made no progress'), { code: 'ENOSPC' });
    done += bytesWritten;
  }
}

class LocalSegmentWriter implements SegmentWriter {
  constructor(readonly fh: FileHandle) {}

  async append(chunks: readonly Uint8Array[]): Promise<void> {
    if (chunks.length > 0) await writeAll(this.fh, chunks);
    await this.fh.datasync();
  }

  async close(): Promise<void> {
    await this.fh.close();
  }
}

const enoent = <T>(err: unknown, value: T): T => {
  if ((err as NodeJS.ErrnoException).code === 'ENOENT') return value;
  throw err;
};

/** Audio logs as files: `<dir>/sessions/<id>.jsonl`, `<dir>/segments/<writer>.<seq>.seg` and its `.idx`. */
export class LocalAudioLogStore implements AudioLogStore {
  readonly dir: string;
  readonly #sessions: string;
  readonly #segments: string;

  constructor(dataDir: string) {
    this.dir = path.join(dataDir, 'audio-log');
    this.#sessions = path.join(this.dir, 'sessions');
    this.#segments = path.join(this.dir, 'segments');
  }

  /** The manifest file of a session. */
  manifestFile(sessionId: string): string {
    if (!isLogId(sessionId)) throw new Error('bad audio log id');
    return path.join(this.#sessions, `${sessionId}.jsonl`);
  }

  segmentFile(name: string): string {
    if (!parseSegmentName(name)) throw new Error('bad segment name');
    return path.join(this.#segments, `${name}.seg`);
  }

  async createManifest(sessionId: string, lines: readonly ManifestLine[]): Promise<void> {
    const file = this.manifestFile(sessionId);
    await mkdir(this.#sessions, { recursive: true });
    const fh = await open(file, 'wx');
    try {
      await fh.write(lines.map((l) => `${JSON.stringify(l)}\n`).join(''));
      await fh.datasync();
    } finally {
      await fh.close();
    }
  }

  async appendManifest(sessionId: string, lines: readonly ManifestLine[], sync: boolean): Promise<void> {
    const text = lines.map((l) => `${JSON.stringify(l)}\n`).join('');
    // Never creates the file: a log the sweep deleted meanwhile stays deleted.
    const fh = await open(this.manifestFile(sessionId), constants.O_WRONLY | constants.O_APPEND);
    try {
      await fh.write(text);
      if (sync) await fh.datasync();
    } finally {
      await fh.close();
    }
  }

  async manifest(sessionId: string): Promise<ManifestLine[] | undefined> {
    if (!isLogId(sessionId)) return undefined;
    try {
      return parseManifest(await readFile(this.manifestFile(sessionId), 'utf8'));
    } catch (err) {
      return enoent(err, undefined);
    }
  }

  async manifests(): Promise<StoredManifest[]> {
    const names = await readdir(this.#sessions).catch((err: unknown) => enoent(err, [] as string[]));
    const out: StoredManifest[] = [];
    for (const n of names) {
      if (!n.endsWith('.jsonl')) continue;
      const sessionId = n.slice(0, -6);
      if (!isLogId(sessionId)) continue;
      const s = await stat(path.join(this.#sessions, n)).catch(() => undefined);
      if (s) out.push({ sessionId, modifiedMs: s.mtimeMs });
    }
    return out;
  }

  async removeManifest(sessionId: string): Promise<void> {
    if (isLogId(sessionId)) await rm(this.manifestFile(sessionId), { force: true });
  }

  async createSegment(name: string, createdAtMs: number): Promise<SegmentWriter> {
    const file = this.segmentFile(name);
    await mkdir(this.#segments, { recursive: true });
    const fh = await open(file, 'wx');
    try {
      await fh.write(encodeSegmentHead(createdAtMs));
    } catch (err) {
      await fh.close();
      throw err;
    }
    return new LocalSegmentWriter(fh);
  }

  async segments(): Promise<StoredSegment[]> {
    const names = await readdir(this.#segments).catch((err: unknown) => enoent(err, [] as string[]));
    const out: StoredSegment[] = [];
    for (const n of names) {
      if (!n.endsWith('.seg')) continue;
      const id = parseSegmentName(n.slice(0, -4));
      if (!id) continue;
      const s = await stat(path.join(this.#segments, n)).catch(() => undefined);
      if (s) out.push({ name: n.slice(0, -4), ...id, bytes: s.size, modifiedMs: s.mtimeMs });
    }
    return out.sort((a, b) => (a.writer === b.writer ? a.seq - b.seq : a.writer < b.writer ? -1 : 1));
  }

  async readSegment(name: string): Promise<Uint8Array | undefined> {
    return readFile(this.segmentFile(name)).catch((err: unknown) => enoent(err, undefined));
  }

  async readSpans(name: string, spans: ChunkSpans): Promise<Uint8Array[] | undefined> {
    let fh: FileHandle;
    try {
      fh = await open(this.segmentFile(name), 'r');
    } catch (err) {
      return enoent(err, undefined);
    }
    try {
      const out: Uint8Array[] = [];
      for (const [at, length] of spans) {
        const b = Buffer.allocUnsafe(length);
        const { bytesRead } = await fh.read(b, 0, length, at);
        out.push(b.subarray(0, bytesRead));
      }
      return out;
    } finally {
      await fh.close();
    }
  }

  async readIndex(name: string): Promise<SegmentIndex | undefined> {
    try {
      return JSON.parse(await readFile(path.join(this.#segments, `${name}.idx`), 'utf8')) as SegmentIndex;
    } catch {
      return undefined; // none yet, or torn: the segment itself says the same
    }
  }

  async writeIndex(name: string, index: SegmentIndex): Promise<void> {
    const file = path.join(this.#segments, `${name}.idx`);
    // Written aside and renamed: a reader sees the whole index or none.
    await writeFile(`${file}.tmp`, JSON.stringify(index));
    await rename(`${file}.tmp`, file);
  }

  async legacy(): Promise<StoredManifest[]> {
    const names = await readdir(this.dir).catch((err: unknown) => enoent(err, [] as string[]));
    const out: StoredManifest[] = [];
    for (const n of names) {
      if (n === 'sessions' || n === 'segments' || !isLogId(n)) continue;
      const s = await stat(path.join(this.dir, n)).catch(() => undefined);
      if (s?.isDirectory()) out.push({ sessionId: n, modifiedMs: s.mtimeMs });
    }
    return out;
  }

  async removeLegacy(sessionId: string): Promise<void> {
    if (isLogId(sessionId) && sessionId !== 'sessions' && sessionId !== 'segments') await rm(path.join(this.dir, sessionId), { recursive: true, force: true });
  }

  async removeSegment(name: string): Promise<void> {
    await rm(path.join(this.#segments, `${name}.idx`), { force: true });
    await rm(this.segmentFile(name), { force: true });
  }
}

/** One writer's run of a session's records (a node's connections to it, in order). */
export interface WriterRun {
  writer: string;
  records: LogRecord[];
}

/** A session's log read back. */
export interface SessionLogRead {
  header: AudioLogHeader;
  runs: WriterRun[];
  handedOver: Set<number>;
  /** Bytes of its chunks. */
  bytes: number;
  /** Latest write to its manifest or to a segment holding its chunks, epoch ms (0 when unknown). */
  lastWriteMs: number;
}

export interface ReadSessionOptions {
  /** The index of a segment this process still writes (its own current one), when it has it in memory. */
  liveIndex?: (name: string) => SegmentIndex | undefined;
  /** Segments on disk, when the caller listed them already. */
  segments?: readonly StoredSegment[];
}

/** Reads a session's log: its manifest, then its chunks from each writer's segments in the manifest's order. */
export async function readSessionLog(store: AudioLogStore, sessionId: string, o: ReadSessionOptions = {}): Promise<SessionLogRead | undefined> {
  const lines = await store.manifest(sessionId);
  if (!lines) return undefined;
  let header: AudioLogHeader | undefined;
  const handedOver = new Set<number>();
  const ranges: { writer: string; from: number; to?: number }[] = [];
  for (const l of lines) {
    if ('header' in l) header ??= l.header;
    else if ('handedOver' in l) handedOver.add(l.handedOver);
    else if ('from' in l) ranges.push({ writer: l.writer, from: l.from });
    else if ('to' in l) {
      for (let i = ranges.length - 1; i >= 0; i--) {
        const r = ranges[i]!;
        if (r.writer !== l.writer || r.to !== undefined) continue;
        r.to = l.to;
        break;
      }
    }
  }
  if (!header) return undefined;
  const segments = o.segments ?? (await store.segments());
  const out: SessionLogRead = { header, runs: [], handedOver, bytes: 0, lastWriteMs: 0 };
  const seen = new Set<string>();
  for (const r of ranges) {
    const run: WriterRun = { writer: r.writer, records: [] };
    out.runs.push(run);
    for (const s of segments) {
      if (s.writer !== r.writer || s.seq < r.from || (r.to !== undefined && s.seq > r.to) || seen.has(s.name)) continue;
      seen.add(s.name);
      const spans = await spansOf(store, s.name, sessionId, o.liveIndex);
      if (!spans || spans.length === 0) continue;
      out.lastWriteMs = Math.max(out.lastWriteMs, s.modifiedMs);
      const bufs = await store.readSpans(s.name, spans);
      for (const b of bufs ?? []) {
        const c = readChunk(Buffer.from(b.buffer, b.byteOffset, b.byteLength), 0);
        if (!c || c.sessionId !== sessionId) continue;
        out.bytes += c.length;
        run.records.push(...parseRecords(c.records));
      }
    }
  }
  return out;
}

/** Where a session's chunks lie in a segment: from its index (in memory or beside it), else by reading it whole. */
async function spansOf(store: AudioLogStore, name: string, sessionId: string, live?: (name: string) => SegmentIndex | undefined): Promise<ChunkSpans | undefined> {
  const idx = live?.(name) ?? (await store.readIndex(name));
  if (idx) return idx.sessions[sessionId];
  const raw = await store.readSegment(name);
  const p = raw && parseSegment(raw);
  return p ? indexOf(p).sessions[sessionId] : undefined;
}
