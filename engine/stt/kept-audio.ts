// Audio a failed speech provider never answered for, kept under DATA_DIR/kept-audio/<conversation id>/ until a job
// transcribes it: raw PCM plus a JSON sidecar written last, so a crash mid-write leaves no half-entry behind.
import { mkdir, readdir, readFile, rm, writeFile, rename } from 'node:fs/promises';
import path from 'node:path';

export interface KeptAudioMeta {
  uid: string;
  conversationId: string;
  sessionId: string;
  language: string;
  /** 0-based channel, and how many the session had (2 = a call: channel 0 is the wearer). */
  channel: number;
  channels: number;
  /** Conversation time, in seconds, of the first kept sample. */
  offsetS: number;
  sampleRateHz: 16000;
  createdAtMs: number;
}

export interface KeptAudio {
  id: string;
  meta: KeptAudioMeta;
  pcm: Int16Array;
}

const SAFE = /^[A-Za-z0-9_-]{1,100}$/;

export class KeptAudioStore {
  readonly dir: string;

  constructor(dataDir: string) {
    this.dir = path.join(dataDir, 'kept-audio');
  }

  /** Writes one channel's audio; returns its id (`<conversation id>/<session id>-<channel>`). */
  async keep(meta: KeptAudioMeta, chunks: readonly Int16Array[]): Promise<string> {
    if (!SAFE.test(meta.conversationId) || !SAFE.test(meta.sessionId)) throw new Error('unsafe kept-audio id');
    const folder = path.join(this.dir, meta.conversationId);
    await mkdir(folder, { recursive: true });
    const name = `${meta.sessionId}-${meta.channel}`;
    const base = path.join(folder, name);
    await writeFile(`${base}.pcm`, chunks.map((c) => new Uint8Array(c.buffer, c.byteOffset, c.byteLength)));
    await writeFile(`${base}.json.tmp`, JSON.stringify(meta));
    await rename(`${base}.json.tmp`, `${base}.json`);
    return `${meta.conversationId}/${name}`;
  }

  async load(id: string): Promise<KeptAudio | undefined> {
    const base = this.#base(id);
    try {
      const meta = JSON.parse(await readFile(`${base}.json`, 'utf8')) as KeptAudioMeta;
      const bytes = await readFile(`${base}.pcm`);
      const pcm = new Int16Array(bytes.buffer, bytes.byteOffset, bytes.byteLength >> 1);
      return { id, meta, pcm };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw err;
    }
  }

  /** Ids still waiting for a conversation. */
  async pending(conversationId: string): Promise<string[]> {
    if (!SAFE.test(conversationId)) return [];
    try {
      const names = await readdir(path.join(this.dir, conversationId));
      return names.filter((n) => n.endsWith('.json')).map((n) => `${conversationId}/${n.slice(0, -'.json'.length)}`).sort();
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw err;
    }
  }

  async remove(id: string): Promise<void> {
    const base = this.#base(id);
    await rm(`${base}.json`, { force: true });
    await rm(`${base}.pcm`, { force: true });
    const folder = path.dirname(base);
    if ((await readdir(folder).catch(() => ['?'])).length === 0) await rm(folder, { recursive: true, force: true });
  }

  #base(id: string): string {
    const [conversation, name, extra] = id.split('/');
    if (!conversation || !name || extra !== undefined || !SAFE.test(conversation) || !SAFE.test(name)) throw new Error('bad kept-audio id');
    return path.join(this.dir, conversation, name);
  }
}
