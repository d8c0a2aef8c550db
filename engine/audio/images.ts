// Reassembles a session's `image_chunk` messages into whole images, bounded in count, size and time (docs/protocol.md).
import type { Clock } from '../clock.js';

/** Why an `image_chunk` was refused; the image it belonged to may have been dropped too (see each code). */
export const IMAGE_CHUNK_ERROR = {
  /** Not a JSON object, or `type` is not `image_chunk`. */
  NOT_A_MESSAGE: 'ENG_ERR_WS_IMAGE_CHUNK_NOT_A_MESSAGE',
  /** A field is missing, has the wrong type or is out of range; the pending image is kept. */
  FIELD_INVALID: 'ENG_ERR_WS_IMAGE_CHUNK_FIELD_INVALID',
  /** `total` differs from the one the image's first chunk announced; the pending image is kept. */
  TOTAL_MISMATCH: 'ENG_ERR_WS_IMAGE_CHUNK_TOTAL_MISMATCH',
  /** A new image would exceed the pending-image limit. */
  TOO_MANY_PENDING: 'ENG_ERR_WS_IMAGE_CHUNK_TOO_MANY_PENDING',
  /** The image's decoded bytes exceed the size cap; the pending image is dropped. */
  IMAGE_TOO_LARGE: 'ENG_ERR_WS_IMAGE_CHUNK_IMAGE_TOO_LARGE',
} as const;
export type ImageChunkErrorCode = (typeof IMAGE_CHUNK_ERROR)[keyof typeof IMAGE_CHUNK_ERROR];

export interface AssembledImage {
  id: string;
  bytes: Buffer;
}

export type ImageChunkResult =
  | { status: 'pending'; id: string; received: number; total: number; duplicate: boolean }
  | { status: 'complete'; image: AssembledImage }
  | { status: 'rejected'; code: ImageChunkErrorCode; field?: string };

export interface ImageAssemblerOptions {
  /**
   * Most images being assembled at once; a chunk starting one more is rejected.
   * @defaultValue 50
   */
  maxPendingImages?: number;
  /**
   * How long an image may take to arrive, in milliseconds from its first chunk.
   * @defaultValue 60000 (60 seconds)
   */
  ttlMs?: number;
  /**
   * Largest decoded image, in bytes.
   * @defaultValue 10485760 (10 MiB)
   */
  maxImageBytes?: number;
  /**
   * Largest `total` (chunks per image) accepted.
   * @defaultValue 1000
   */
  maxChunks?: number;
  /**
   * Longest image id, in characters.
   * @defaultValue 128
   */
  maxIdChars?: number;
}

interface Pending {
  firstChunkAt: number;
  total: number;
  chunks: (Buffer | undefined)[];
  received: number;
  bytes: number;
}

// Canonical base64 only: Buffer.from silently skips junk, which would assemble a corrupt image.
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

function reject(code: ImageChunkErrorCode, field?: string): ImageChunkResult {
  return field === undefined ? { status: 'rejected', code } : { status: 'rejected', code, field };
}

/** One session's images in flight. Time comes from the injected clock; nothing here starts a timer. */
export class ImageAssembler {
  readonly #clock: Clock;
  readonly #pending = new Map<string, Pending>();
  readonly #maxPending: number;
  readonly #ttlMs: number;
  readonly #maxImageBytes: number;
  readonly #maxChunks: number;
  readonly #maxIdChars: number;

  constructor(clock: Clock, options: ImageAssemblerOptions = {}) {
    this.#clock = clock;
    this.#maxPending = options.maxPendingImages ?? 50;
    this.#ttlMs = options.ttlMs ?? 60_000;
    this.#maxImageBytes = options.maxImageBytes ?? 10 * 1024 * 1024;
    this.#maxChunks = options.maxChunks ?? 1000;
    this.#maxIdChars = options.maxIdChars ?? 128;
  }

  /** Images currently being assembled. */
  get pendingCount(): number {
    return this.#pending.size;
  }

  /** Validates one parsed `image_chunk` message and files it; returns the image once its last chunk arrives. */
  add(raw: unknown): ImageChunkResult {
    if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) return reject(IMAGE_CHUNK_ERROR.NOT_A_MESSAGE, 'type');
    const m = raw as Record<string, unknown>;
    if (m['type'] !== 'image_chunk') return reject(IMAGE_CHUNK_ERROR.NOT_A_MESSAGE, 'type');
    const { id, index, total, data } = m;
    if (typeof id !== 'string' || id === '' || id.length > this.#maxIdChars) return reject(IMAGE_CHUNK_ERROR.FIELD_INVALID, 'id');
    if (typeof total !== 'number' || !Number.isSafeInteger(total) || total < 1 || total > this.#maxChunks) {
      return reject(IMAGE_CHUNK_ERROR.FIELD_INVALID, 'total');
    }
    if (typeof index !== 'number' || !Number.isSafeInteger(index) || index < 0 || index >= total) {
      return reject(IMAGE_CHUNK_ERROR.FIELD_INVALID, 'index');
    }
    // Checked on the encoded length first so an oversized chunk is never decoded.
    if (typeof data !== 'string' || data === '' || data.length > Math.ceil(this.#maxImageBytes / 3) * 4 || !BASE64.test(data)) {
      return reject(IMAGE_CHUNK_ERROR.FIELD_INVALID, 'data');
    }

    const now = this.#clock.now();
    let entry = this.#pending.get(id);
    if (entry !== undefined && this.#expired(entry, now)) {
      this.#pending.delete(id);
      entry = undefined;
    }
    if (entry === undefined) {
      if (this.#pending.size >= this.#maxPending) this.sweep();
      if (this.#pending.size >= this.#maxPending) return reject(IMAGE_CHUNK_ERROR.TOO_MANY_PENDING);
      entry = { firstChunkAt: now, total, chunks: new Array<Buffer | undefined>(total), received: 0, bytes: 0 };
      this.#pending.set(id, entry);
    } else if (entry.total !== total) {
      return reject(IMAGE_CHUNK_ERROR.TOTAL_MISMATCH, 'total');
    }

    // Retransmissions are normal on a flaky link: the first copy of a chunk wins.
    if (entry.chunks[index] !== undefined) {
      return { status: 'pending', id, received: entry.received, total, duplicate: true };
    }
    const bytes = Buffer.from(data, 'base64');
    if (entry.bytes + bytes.length > this.#maxImageBytes) {
      this.#pending.delete(id);
      return reject(IMAGE_CHUNK_ERROR.IMAGE_TOO_LARGE);
    }
    entry.chunks[index] = bytes;
    entry.received += 1;
    entry.bytes += bytes.length;
    if (entry.received < total) return { status: 'pending', id, received: entry.received, total, duplicate: false };

    this.#pending.delete(id);
    return { status: 'complete', image: { id, bytes: Buffer.concat(entry.chunks as Buffer[], entry.bytes) } };
  }

  /** Drops images whose first chunk is older than the TTL; returns their ids. Call it from the session's tick. */
  sweep(): string[] {
    const now = this.#clock.now();
    const dropped: string[] = [];
    for (const [id, entry] of this.#pending) {
      if (this.#expired(entry, now)) {
        this.#pending.delete(id);
        dropped.push(id);
      }
    }
    return dropped;
  }

  /** Forgets every pending image (session end). */
  clear(): void {
    this.#pending.clear();
  }

  #expired(entry: Pending, now: number): boolean {
    return now - entry.firstChunkAt >= this.#ttlMs;
  }
}
