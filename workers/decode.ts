// Codec shard worker: keeps `stream key → decoders` in this thread and answers open / decodePacked / close tasks.
import { checkCodecParams, CODECS, moveAnswer, type CodecAnswer, type CodecParams, type CodecTask, type DecodePackedTask, type FailAnswer, type PackedAnswer, type PcmAnswer } from './messages.js';
import { createChannelDecoder, type ChannelDecoder, type ChannelResult } from './channel-decoders.js';
import { packAnswer, readRecords, type DecodedPart } from './packing.js';

interface Session {
  /** One decoder per channel: index 0 = channel id 0x01, index 1 = 0x02. */
  channels: ChannelDecoder[];
}

const sessions = new Map<number, Session>();

function fail(code: FailAnswer['code'], message: string): FailAnswer {
  return { ok: false, code, message };
}

function openSession(key: number, params: CodecParams): Session {
  sessions.get(key)?.channels.forEach((c) => c.dispose());
  const channels: ChannelDecoder[] = [];
  for (let i = 0; i < params.channels; i++) channels.push(createChannelDecoder(params));
  const session = { channels };
  sessions.set(key, session);
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

function pcmAnswer(pcm: Int16Array[]): PcmAnswer {
  return moveAnswer<PcmAnswer>({ ok: true, pcm, frames: 0, corruptFrames: 0, recreated: false }, pcm.map((p) => p.buffer as ArrayBuffer));
}

/** Decodes one stream's messages of a task; synchronous unless a decoder is (AAC waits on ffmpeg). */
function decodeStream(key: number, params: CodecParams, messages: readonly Uint8Array[]): DecodedPart | Promise<DecodedPart> {
  let session = sessions.get(key);
  // Unknown here but known to the pool: this thread replaced a crashed one. Re-create the decoders and go on.
  const recreated = session === undefined;
  session ??= openSession(key, params);
  const { channels } = session;
  let routedOut = 0;
  // Route each message to its channel; with two channels the first byte names it.
  let perChannel: (readonly Uint8Array[])[];
  if (channels.length === 1) {
    perChannel = [messages];
  } else {
    const split: Uint8Array[][] = channels.map(() => []);
    for (const m of messages) {
      const id = m[0];
      if (id === 0x01 || id === 0x02) split[id - 1]!.push(m.subarray(1));
      else routedOut++;
    }
    perChannel = split;
  }
  const results = channels.map((c, i) => c.decode(perChannel[i]!));
  const assemble = (done: readonly ChannelResult[]): DecodedPart => {
    let frames = 0;
    let corruptFrames = routedOut;
    for (const r of done) {
      frames += r.frames;
      corruptFrames += r.corruptFrames;
    }
    return { pcm: done.map((r) => r.pcm), frames, corruptFrames, recreated };
  };
  return results.some((r) => r instanceof Promise) ? Promise.all(results).then(assemble) : assemble(results as ChannelResult[]);
}

/** A decoder that threw on something other than a frame is not trusted further: drop it; the next task re-creates it. */
function dropAfterError(key: number, err: unknown): FailAnswer {
  sessions.get(key)?.channels.forEach((c) => c.dispose());
  sessions.delete(key);
  return fail('ENG_ERR_CODEC_FAILED', err instanceof Error ? err.message : String(err));
}

type StreamResult = { key: number; result: DecodedPart | FailAnswer };

function packed(parts: readonly StreamResult[]): PackedAnswer {
  const answer = packAnswer(parts);
  return moveAnswer<PackedAnswer>(answer, [answer.entries.buffer as ArrayBuffer, answer.pcm.buffer as ArrayBuffer]);
}

/**
 * Every stream of the task; one failing stream does not fail the others. Synchronous when every decoder is (no
 * promise per stream); AAC streams wait on ffmpeg concurrently.
 */
function decodePacked(task: DecodePackedTask): PackedAnswer | Promise<PackedAnswer> {
  const byKey = readRecords(task.records);
  const p = task.params;
  const parts: (StreamResult | Promise<StreamResult>)[] = [];
  let waits = false;
  for (let i = 0; i < p.length; i += 4) {
    const key = p[i]!;
    const params: CodecParams = { codec: CODECS[p[i + 1]!]!, sampleRate: p[i + 2]!, channels: p[i + 3] as 1 | 2 };
    try {
      const result = decodeStream(key, params, byKey.get(key) ?? []);
      if (result instanceof Promise) {
        waits = true;
        parts.push(result.then((r) => ({ key, result: r }), (err: unknown) => ({ key, result: dropAfterError(key, err) })));
      } else {
        parts.push({ key, result });
      }
    } catch (err) {
      parts.push({ key, result: dropAfterError(key, err) });
    }
  }
  return waits ? Promise.all(parts).then(packed) : packed(parts as StreamResult[]);
}

async function close(key: number, flush: boolean): Promise<CodecAnswer> {
  const session = sessions.get(key);
  if (session === undefined) return pcmAnswer([]);
  sessions.delete(key);
  if (!flush) {
    session.channels.forEach((c) => c.dispose());
    return pcmAnswer([]);
  }
  const pcm: Int16Array[] = [];
  for (const c of session.channels) pcm.push(concat([await c.end()]));
  return pcmAnswer(pcm);
}

export default function handle(task: CodecTask): CodecAnswer | Promise<CodecAnswer> {
  try {
    switch (task.type) {
      case 'open': {
        const why = checkCodecParams(task);
        if (why !== null) return fail('ENG_ERR_CODEC_UNSUPPORTED', why);
        openSession(task.key, task);
        return { ok: true };
      }
      case 'decodePacked':
        return decodePacked(task);
      case 'close':
        return close(task.key, task.flush).catch((err: unknown) => dropAfterError(task.key, err));
      case 'crash':
        // Test-only: in a worker thread process.exit ends this thread, not the process.
        process.exit(1);
    }
  } catch (err) {
    return fail('ENG_ERR_CODEC_FAILED', err instanceof Error ? err.message : String(err));
  }
}
