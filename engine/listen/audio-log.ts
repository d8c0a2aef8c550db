// A session's audio log (ack=enabled): the frames a device sent, as received, with their session offsets, in
// append-only parts; every record carries its length and a checksum, so a tail torn by a crash is found and cut.
import { crc32 } from 'node:zlib';
import { mkdir, open, readdir, readFile, rm, stat, truncate, type FileHandle } from 'node:fs/promises';
import path from 'node:path';

/** `WBAL`: the first four bytes of every part. */
const MAGIC = 0x4c414257;
const VERSION = 1;
/** magic u32, version u8, 3 reserved, header JSON length u32, header JSON checksum u32. */
const FILE_HEAD = 16;
/** type u8, 3 reserved, payload length u32, session offset f64 (ms), checksum u32 of the 16 bytes before it and the payload. */
const RECORD_HEAD = 20;

export const RecordType = {
  /** One frame as the device sent it; the offset is where its audio starts. */
  AUDIO: 1,
  /** A JSON mark (AudioLogMark): a connection's start and end, a gap, a hand-over to kept audio. */
  MARK: 2,
} as const;

/** What a part says about itself, written once at its start. */
export interface AudioLogHeader {
  sessionId: string;
  uid: string;
  codec: string;
  sampleRate: number;
  channels: number;
  language: string;
  /** The conversation source the session records with (a crashed connection's audio may have to open one). */
  source: string;
  /** The node process that writes the part (its heartbeat in Redis says whether it still lives). */
  writer: string;
  createdAtMs: number;
}

/**
 * `start`: a connection began writing (epoch counts them across parts); `conversation`: its audio goes into this
 * conversation, stream time 0 being `wallMs`; `end`: everything that connection received reached a provider or was
 * kept; `gap`: the client resumed past the log's end, audio `[offsetMs, toMs)` never arrived; `handed_over`: a crashed
 * connection's audio went to kept audio.
 */
export type AudioLogMark =
  | { kind: 'start'; epoch: number; wallMs: number }
  | { kind: 'conversation'; epoch: number; conversationId: string; wallMs: number }
  | { kind: 'end'; epoch: number }
  | { kind: 'gap'; epoch: number; toMs: number }
  | { kind: 'handed_over'; epoch: number };

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

export function encodeHeader(h: AudioLogHeader): Uint8Array {
  const json = Buffer.from(JSON.stringify(h), 'utf8');
  const out = Buffer.alloc(FILE_HEAD + json.length);
  out.writeUInt32LE(MAGIC, 0);
  out.writeUInt8(VERSION, 4);
  out.writeUInt32LE(json.length, 8);
  out.writeUInt32LE(crc32(json), 12);
  json.copy(out, FILE_HEAD);
  return out;
}

/** One record, ready to append. */
export function encodeRecord(type: number, offsetMs: number, payload: Uint8Array): Uint8Array {
  const out = Buffer.allocUnsafe(RECORD_HEAD + payload.length);
  out.writeUInt32LE(type, 0);
  out.writeUInt32LE(payload.length, 4);
  out.writeDoubleLE(offsetMs, 8);
  out.set(payload, RECORD_HEAD);
  out.writeUInt32LE(crc32(payload, crc32(out.subarray(0, 16))), 16);
  return out;
}

export function encodeMark(offsetMs: number, mark: AudioLogMark): Uint8Array {
  return encodeRecord(RecordType.MARK, offsetMs, Buffer.from(JSON.stringify(mark), 'utf8'));
}

/** A part read back: its header, its whole records, and the length up to the last of them (what follows is torn). */
export interface ParsedPart {
  header: AudioLogHeader;
  records: LogRecord[];
  /** Bytes of the part that hold whole, checked records. */
  validBytes: number;
  /** Bytes after them: a record cut short or damaged by a crash. */
  tornBytes: number;
}

/** Reads a part; undefined when even its header is not whole (a crash just after the part was created). */
export function parsePart(buf: Uint8Array): ParsedPart | undefined {
  const b = Buffer.from(buf.buffer, buf.byteOffset, buf.byteLength);
  if (b.length < FILE_HEAD || b.readUInt32LE(0) !== MAGIC || b.readUInt8(4) !== VERSION) return undefined;
  const jsonLen = b.readUInt32LE(8);
  if (FILE_HEAD + jsonLen > b.length) return undefined;
  const json = b.subarray(FILE_HEAD, FILE_HEAD + jsonLen);
  if (crc32(json) !== b.readUInt32LE(12)) return undefined;
  const header = JSON.parse(json.toString('utf8')) as AudioLogHeader;
  const records: LogRecord[] = [];
  let at = FILE_HEAD + jsonLen;
  while (at + RECORD_HEAD <= b.length) {
    const type = b.readUInt32LE(at);
    const len = b.readUInt32LE(at + 4);
    if ((type !== RecordType.AUDIO && type !== RecordType.MARK) || at + RECORD_HEAD + len > b.length) break;
    const payload = b.subarray(at + RECORD_HEAD, at + RECORD_HEAD + len);
    if (crc32(payload, crc32(b.subarray(at, at + 16))) !== b.readUInt32LE(at + 16)) break;
    const offsetMs = b.readDoubleLE(at + 8);
    if (type === RecordType.AUDIO) records.push({ type, offsetMs, bytes: payload });
    else {
      let mark: AudioLogMark;
      try {
        mark = JSON.parse(payload.toString('utf8')) as AudioLogMark;
      } catch {
        break;
      }
      records.push({ type, offsetMs, mark });
    }
    at += RECORD_HEAD + len;
  }
  return { header, records, validBytes: at, tornBytes: b.length - at };
}

/** One part being written: appends go out together, and resolve once they are durable. */
export interface AudioLogPartWriter {
  /** Writes `chunks` after what the part holds and makes them durable (write, then fsync). */
  append(chunks: readonly Uint8Array[]): Promise<void>;
  close(): Promise<void>;
}

export interface StoredPart {
  sessionId: string;
  part: number;
  bytes: number;
  /** Last write, epoch ms. */
  modifiedMs: number;
}

/**
 * Where audio logs live. The local implementation keeps one file per part under DATA_DIR/audio-log/; an object store
 * fits the same seam: a part becomes a prefix, each append one object named by its sequence (objects are written
 * whole, so an upload is durable once acknowledged), read() concatenates them, and cutTorn() has nothing to cut.
 */
export interface AudioLogStore {
  /** Creates part `part` of the session with its header; fails (EEXIST) when another writer took that number. */
  create(sessionId: string, part: number, header: AudioLogHeader): Promise<AudioLogPartWriter>;
  /** The session's part numbers, ascending. */
  parts(sessionId: string): Promise<number[]>;
  read(sessionId: string, part: number): Promise<Uint8Array | undefined>;
  /** Cuts a part to its first `bytes` (a torn tail after a crash). */
  cutTorn(sessionId: string, part: number, bytes: number): Promise<void>;
  /** Every stored part. */
  list(): Promise<StoredPart[]>;
  remove(sessionId: string): Promise<void>;
}

const SAFE_ID = /^[A-Za-z0-9_-]{1,100}$/;

/** Whether `id` can name a session's log (a UUID does). */
export function isLogId(id: string): boolean {
  return SAFE_ID.test(id);
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

class LocalPartWriter implements AudioLogPartWriter {
  constructor(readonly fh: FileHandle) {}

  async append(chunks: readonly Uint8Array[]): Promise<void> {
    if (chunks.length > 0) await writeAll(this.fh, chunks);
    await this.fh.datasync();
  }

  async close(): Promise<void> {
    await this.fh.close();
  }
}

/** Audio logs as files: `<dir>/<session id>/<part>.log`, each opened for appending by one writer. */
export class LocalAudioLogStore implements AudioLogStore {
  readonly dir: string;

  constructor(dataDir: string) {
    this.dir = path.join(dataDir, 'audio-log');
  }

  #file(sessionId: string, part: number): string {
    if (!isLogId(sessionId) || !Number.isInteger(part) || part < 0) throw new Error('bad audio log id');
    return path.join(this.dir, sessionId, `${String(part).padStart(6, '0')}.log`);
  }

  async create(sessionId: string, part: number, header: AudioLogHeader): Promise<AudioLogPartWriter> {
    const file = this.#file(sessionId, part);
    await mkdir(path.dirname(file), { recursive: true });
    const fh = await open(file, 'wx');
    try {
      await writeAll(fh, [encodeHeader(header)]);
      await fh.datasync();
    } catch (err) {
      await fh.close();
      throw err;
    }
    return new LocalPartWriter(fh);
  }

  async parts(sessionId: string): Promise<number[]> {
    if (!isLogId(sessionId)) return [];
    try {
      const names = await readdir(path.join(this.dir, sessionId));
      return names.filter((n) => /^\d{6,}\.log$/.test(n)).map((n) => Number(n.slice(0, -4))).sort((a, b) => a - b);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw err;
    }
  }

  async read(sessionId: string, part: number): Promise<Uint8Array | undefined> {
    try {
      return await readFile(this.#file(sessionId, part));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw err;
    }
  }

  async cutTorn(sessionId: string, part: number, bytes: number): Promise<void> {
    await truncate(this.#file(sessionId, part), bytes);
  }

  async list(): Promise<StoredPart[]> {
    let sessions: string[];
    try {
      sessions = await readdir(this.dir);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw err;
    }
    const out: StoredPart[] = [];
    for (const sessionId of sessions) {
      for (const part of await this.parts(sessionId)) {
        const s = await stat(this.#file(sessionId, part)).catch(() => undefined);
        if (s) out.push({ sessionId, part, bytes: s.size, modifiedMs: s.mtimeMs });
      }
    }
    return out;
  }

  async remove(sessionId: string): Promise<void> {
    if (!isLogId(sessionId)) return;
    await rm(path.join(this.dir, sessionId), { recursive: true, force: true });
  }
}
