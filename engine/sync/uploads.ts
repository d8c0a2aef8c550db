// Resumable uploads of offline files, on disk under DATA_DIR/sync: a create step names the file and its length, each
// append must start at the stored length (the offset), and the bytes are fsync'd before the new offset is answered,
// so an offset a client was told survives a crash. Nodes that take uploads and run sync jobs share DATA_DIR. An upload
// left alone for a day is given up: a jobs node's sweep removes it, so abandoned parts do not fill the disk.
import { createHash, randomBytes } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { open, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';

export interface UploadMeta {
  uid: string;
  filename: string;
  /** Declared length in bytes. */
  size: number;
  createdAtMs: number;
  /** The last append, or the batch that named it; absent until then. */
  touchedAtMs?: number;
}

export interface UploadState extends UploadMeta {
  id: string;
  /** Bytes stored so far. */
  offset: number;
}

/** Why an append was refused: the offset is not the stored one, or the bytes run past the declared length. */
export class UploadConflict extends Error {
  constructor(
    readonly kind: 'offset' | 'length',
    readonly offset: number,
  ) {
    super(kind);
    this.name = 'UploadConflict';
  }
}

const ID = /^[0-9a-f-]{36}$/;

/** An upload nobody appended to or named in a batch for this long is removed with its bytes. */
export const UPLOAD_IDLE_MS = 24 * 3600_000;
/** How often a jobs node looks for such uploads. */
export const UPLOAD_SWEEP_INTERVAL_MS = 3600_000;

/**
 * A user's unfinished uploads (open, or named in a batch not yet done) are bounded, so one account cannot fill the
 * disk: three batches' worth, two under way and one being uploaded.
 */
export const MAX_OPEN_UPLOADS = 60;
/** …and their declared lengths together (three batches of 64 MiB). */
export const MAX_OPEN_UPLOAD_BYTES = 192 * 1024 * 1024;

/** A user's unfinished uploads: how many, and their declared lengths together. */
export interface OpenUploads {
  count: number;
  bytes: number;
}

/**
 * The start of every upload id of a user: a user's uploads are found by name, without reading everyone's
 * descriptions. 48 bits of a hash of the uid, so two users sharing one is not a practical worry (each description
 * still names its owner, which is checked).
 */
function ownerTag(uid: string): string {
  return createHash('sha256').update(uid).digest('hex').slice(0, 12);
}

/** A new upload id of `uid`'s: the owner's tag, a dash, then 92 random bits in hex (36 characters, as a UUID). */
function newUploadId(uid: string): string {
  return `${ownerTag(uid)}-${randomBytes(12).toString('hex').slice(0, 23)}`;
}

/** When an upload is removed unless it is written to or named in a batch before, in epoch ms (`Upload-Expires`). */
export function uploadExpiresAtMs(meta: UploadMeta): number {
  return (meta.touchedAtMs ?? meta.createdAtMs) + UPLOAD_IDLE_MS;
}

export class UploadStore {
  readonly dir: string;
  /** Appends in flight per upload on this node: a second one at the same offset waits, then meets the new offset. */
  readonly #locks = new Map<string, Promise<unknown>>();

  constructor(dataDir: string) {
    this.dir = path.join(dataDir, 'sync');
    mkdirSync(this.dir, { recursive: true });
  }

  #file(id: string, ext: 'part' | 'json'): string {
    return path.join(this.dir, `${id}.${ext}`);
  }

  async create(meta: UploadMeta): Promise<UploadState> {
    const id = newUploadId(meta.uid);
    // The description first: bytes never lie on disk without one, so the sweep can tell whose they are and how old.
    await this.#writeMeta(id, meta);
    await writeFile(this.#file(id, 'part'), new Uint8Array(0));
    return { id, offset: 0, ...meta };
  }

  /** Replaced whole (a rename), so a crash never leaves a torn description next to its bytes. */
  async #writeMeta(id: string, meta: UploadMeta): Promise<void> {
    const tmp = `${this.#file(id, 'json')}.tmp`;
    await writeFile(tmp, JSON.stringify(meta));
    await rename(tmp, this.#file(id, 'json'));
  }

  /** `uid`'s uploads with their descriptions (uploads made before ids carried their owner's tag are not found). */
  async #ownedBy(uid: string): Promise<{ id: string; meta: UploadMeta }[]> {
    const prefix = `${ownerTag(uid)}-`;
    const ids = (await readdir(this.dir)).filter((n) => n.startsWith(prefix) && n.endsWith('.json')).map((n) => n.slice(0, -'.json'.length));
    const metas = await Promise.all(ids.map((id) => this.#readMeta(id)));
    const owned: { id: string; meta: UploadMeta }[] = [];
    ids.forEach((id, i) => {
      const meta = metas[i];
      if (meta?.uid === uid) owned.push({ id, meta });
    });
    return owned;
  }

  /** `uid`'s unfinished uploads (those from before ids carried their owner's tag are not counted; they age out). */
  async openFor(uid: string): Promise<OpenUploads> {
    const owned = await this.#ownedBy(uid);
    return { count: owned.length, bytes: owned.reduce((n, o) => n + o.meta.size, 0) };
  }

  /** Removes every upload of `uid`'s (the account goes); answers how many. */
  async removeAllFor(uid: string): Promise<number> {
    const owned = await this.#ownedBy(uid);
    for (const { id } of owned) await this.remove(id);
    return owned.length;
  }

  /** Marks an upload as in use at `nowMs` (a batch named it): its idle time starts again. */
  async touch(id: string, nowMs: number): Promise<void> {
    const state = await this.get(id);
    if (state) await this.#touchMeta(state, nowMs);
  }

  /** Rewrites the description when its idle time moves (a form upload's append at its creation time leaves it be). */
  async #touchMeta(state: UploadState, nowMs: number): Promise<void> {
    if (nowMs !== (state.touchedAtMs ?? state.createdAtMs)) await this.#writeMeta(state.id, metaOf(state, nowMs));
  }

  /** An upload's description; undefined when it is missing or cannot be read. */
  async #readMeta(id: string): Promise<UploadMeta | undefined> {
    try {
      return JSON.parse(await readFile(this.#file(id, 'json'), 'utf8')) as UploadMeta;
    } catch {
      return undefined;
    }
  }

  /** An upload and its offset; undefined when there is none by that id. */
  async get(id: string): Promise<UploadState | undefined> {
    if (!ID.test(id)) return undefined;
    const meta = await this.#readMeta(id);
    if (meta === undefined) return undefined;
    try {
      const { size } = await stat(this.#file(id, 'part'));
      return { id, offset: size, ...meta };
    } catch {
      return undefined;
    }
  }

  /** Appends `bytes` at `offset` at `nowMs`; answers the new offset. Throws UploadConflict. */
  async append(id: string, offset: number, bytes: Uint8Array, nowMs: number): Promise<number> {
    const prev = this.#locks.get(id) ?? Promise.resolve();
    const run = prev.catch(() => undefined).then(async () => {
      const state = await this.get(id);
      if (!state) throw new UploadConflict('offset', 0);
      if (offset !== state.offset) throw new UploadConflict('offset', state.offset);
      if (offset + bytes.byteLength > state.size) throw new UploadConflict('length', state.offset);
      const fh = await open(this.#file(id, 'part'), 'a');
      try {
        await fh.writeFile(bytes); // every byte, or the error: a short write on a full disk is not silent
        await fh.sync();
      } finally {
        await fh.close();
      }
      await this.#touchMeta(state, nowMs);
      return offset + bytes.byteLength;
    });
    this.#locks.set(id, run);
    try {
      return await run;
    } finally {
      if (this.#locks.get(id) === run) this.#locks.delete(id);
    }
  }

  /** Stores a whole file at once (a form upload); answers its id. */
  async put(meta: Omit<UploadMeta, 'size'>, bytes: Uint8Array): Promise<string> {
    const state = await this.create({ ...meta, size: bytes.byteLength });
    await this.append(state.id, 0, bytes, meta.createdAtMs);
    return state.id;
  }

  read(id: string): Promise<Buffer> {
    return readFile(this.#file(id, 'part'));
  }

  async remove(id: string): Promise<void> {
    await rm(this.#file(id, 'part'), { force: true });
    await rm(this.#file(id, 'json'), { force: true });
  }

  /**
   * Removes the uploads idle past UPLOAD_IDLE_MS at `nowMs`, and bytes whose description is gone (an append that met
   * a removal); answers how many uploads went. Descriptions that cannot be read are left alone.
   */
  async sweep(nowMs: number): Promise<number> {
    const names = new Set(await readdir(this.dir));
    let removed = 0;
    for (const name of names) {
      const id = name.slice(0, -'.json'.length);
      if (!name.endsWith('.json') || !ID.test(id)) continue;
      const meta = await this.#readMeta(id);
      if (typeof meta?.createdAtMs !== 'number' || uploadExpiresAtMs(meta) > nowMs) continue;
      await this.remove(id);
      removed++;
    }
    for (const name of names) {
      const id = name.slice(0, -'.part'.length);
      if (name.endsWith('.part') && ID.test(id) && !names.has(`${id}.json`)) {
        // Listed without a description: look once more before removing, in case one was being written.
        const described = await stat(this.#file(id, 'json')).then(() => true, () => false);
        if (!described) await rm(this.#file(id, 'part'), { force: true });
      }
    }
    return removed;
  }
}

/** The description an upload's state was read from, touched at `touchedAtMs`. */
function metaOf({ id: _id, offset: _offset, ...meta }: UploadState, touchedAtMs: number): UploadMeta {
  return { ...meta, touchedAtMs };
}
