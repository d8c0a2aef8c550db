// Resumable uploads of offline files, on disk under DATA_DIR/sync: a create step names the file and its length, each
// append must start at the stored length (the offset), and the bytes are fsync'd before the new offset is answered,
// so an offset a client was told survives a crash. Nodes that take uploads and run sync jobs share DATA_DIR.
import { randomUUID } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { open, readFile, rm, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';

export interface UploadMeta {
  uid: string;
  filename: string;
  /** Declared length in bytes. */
  size: number;
  createdAtMs: number;
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
    const id = randomUUID();
    await writeFile(this.#file(id, 'part'), new Uint8Array(0));
    await writeFile(this.#file(id, 'json'), JSON.stringify(meta));
    return { id, offset: 0, ...meta };
  }

  /** An upload and its offset; undefined when there is none by that id. */
  async get(id: string): Promise<UploadState | undefined> {
    if (!ID.test(id)) return undefined;
    try {
      const meta = JSON.parse(await readFile(this.#file(id, 'json'), 'utf8')) as UploadMeta;
      const { size } = await stat(this.#file(id, 'part'));
      return { id, offset: size, ...meta };
    } catch {
      return undefined;
    }
  }

  /** Appends `bytes` at `offset`; answers the new offset. Throws UploadConflict. */
  async append(id: string, offset: number, bytes: Uint8Array): Promise<number> {
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
    await this.append(state.id, 0, bytes);
    return state.id;
  }

  read(id: string): Promise<Buffer> {
    return readFile(this.#file(id, 'part'));
  }

  async remove(id: string): Promise<void> {
    await rm(this.#file(id, 'part'), { force: true });
    await rm(this.#file(id, 'json'), { force: true });
  }
}
