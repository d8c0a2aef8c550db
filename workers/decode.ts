// Codec shard worker: keeps `sessionId → decoders` in this thread and answers open / decode / close tasks.
import { checkCodecParams, moveAnswer, type CodecAnswer, type CodecParams, type CodecTask, type DecodeTask, type FailAnswer, type ManyAnswer, type PcmAnswer } from './messages.js';
import { createChannelDecoder, type ChannelDecoder } from './channel-decoders.js';

interface Session {
  params: CodecParams;
  /** One decoder per channel: index 0 = channel id 0x01, index 1 = 0x02. */
  channels: ChannelDecoder[];
}

const sessions = new Map<string, Session>();

function fail(code: FailAnswer['code'], message: string): FailAnswer {
  return { ok: false, code, message };
}

function openSession(sessionId: string, params: CodecParams): Session {
  sessions.get(sessionId)?.channels.forEach((c) => c.dispose());
  const channels: ChannelDecoder[] = [];
  for (let i = 0; i < params.channels; i++) channels.push(createChannelDecoder(params));
  const session = { params: { codec: params.codec, sampleRate: params.sampleRate, channels: params.channels }, channels };
  sessions.set(sessionId, session);
  return session;
}

/** Concatenates chunks into one array that owns its buffer (so it can be moved). */
function concat(chunks: readonly Int16Array[]): Int16Array {
  let n = 0;
  for (const c of chunks) n += c.length;
  const out = new Int16Array(n);
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.length;
  }
  return out;
}

function pcmAnswer(pcm: Int16Array[], frames: number, corruptFrames: number, recreated: boolean): PcmAnswer {
  return moveAnswer<PcmAnswer>({ ok: true, pcm, frames, corruptFrames, recreated }, pcm.map((p) => p.buffer as ArrayBuffer));
}

/** Decodes one session's batch; the PCM is not yet marked for moving (the caller moves every buffer at once). */
async function decodeRaw(task: DecodeTask): Promise<PcmAnswer> {
  let session = sessions.get(task.sessionId);
  // Unknown here but known to the pool: this thread replaced a crashed one. Re-create the decoders and go on.
  const recreated = session === undefined;
  session ??= openSession(task.sessionId, task);
  const { channels } = session;
  let corruptFrames = 0;
  // Route each message to its channel; with two channels the first byte names it.
  const perChannel: Uint8Array[][] = channels.map(() => []);
  if (channels.length === 1) {
    perChannel[0] = task.messages;
  } else {
    for (const m of task.messages) {
      const id = m[0];
      if (id === 0x01 || id === 0x02) perChannel[id - 1]!.push(m.subarray(1));
      else corruptFrames++;
    }
  }
  const pcm: Int16Array[] = [];
  let frames = 0;
  for (let c = 0; c < channels.length; c++) {
    const r = await channels[c]!.decode(perChannel[c]!);
    frames += r.frames;
    corruptFrames += r.corruptFrames;
    pcm.push(concat(r.pcm));
  }
  return { ok: true, pcm, frames, corruptFrames, recreated };
}

/** A decoder that threw on something other than a frame is not trusted further: drop it; the next task re-creates it. */
function dropAfterError(sessionId: string, err: unknown): FailAnswer {
  sessions.get(sessionId)?.channels.forEach((c) => c.dispose());
  sessions.delete(sessionId);
  return fail('ENG_ERR_CODEC_FAILED', err instanceof Error ? err.message : String(err));
}

/** Every item at once (AAC items wait on ffmpeg concurrently); one failing item does not fail the others. */
async function decodeMany(items: readonly DecodeTask[]): Promise<ManyAnswer> {
  const answers = await Promise.all(items.map((item) => decodeRaw(item).catch((err: unknown) => dropAfterError(item.sessionId, err))));
  const buffers = answers.flatMap((a) => (a.ok ? a.pcm.map((p) => p.buffer as ArrayBuffer) : []));
  return moveAnswer<ManyAnswer>({ ok: true, items: answers }, buffers);
}

async function close(sessionId: string, flush: boolean): Promise<CodecAnswer> {
  const session = sessions.get(sessionId);
  if (session === undefined) return pcmAnswer([], 0, 0, false);
  sessions.delete(sessionId);
  if (!flush) {
    session.channels.forEach((c) => c.dispose());
    return pcmAnswer([], 0, 0, false);
  }
  const pcm: Int16Array[] = [];
  for (const c of session.channels) pcm.push(await c.end());
  return pcmAnswer(pcm.map((p) => concat([p])), 0, 0, false);
}

export default async function handle(task: CodecTask): Promise<CodecAnswer> {
  try {
    switch (task.type) {
      case 'open': {
        const why = checkCodecParams(task);
        if (why !== null) return fail('ENG_ERR_CODEC_UNSUPPORTED', why);
        openSession(task.sessionId, task);
        return { ok: true };
      }
      case 'decode': {
        const a = await decodeRaw(task);
        return pcmAnswer(a.pcm, a.frames, a.corruptFrames, a.recreated);
      }
      case 'decodeMany':
        return await decodeMany(task.items);
      case 'close':
        return await close(task.sessionId, task.flush);
      case 'crash':
        // Test-only: in a worker thread process.exit ends this thread, not the process.
        process.exit(1);
    }
  } catch (err) {
    if (task.type === 'decode' || task.type === 'close') return dropAfterError(task.sessionId, err);
    return fail('ENG_ERR_CODEC_FAILED', err instanceof Error ? err.message : String(err));
  }
}
