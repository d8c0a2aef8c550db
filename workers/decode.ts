// Codec shard worker: keeps `stream key → decoders` and the shard's provider sockets in this thread, and answers their tasks.
import { getHeapStatistics } from 'node:v8';
import { checkCodecParams, CODECS, moveAnswer, type ClipAnswer, type CodecAnswer, type CodecParams, type CodecTask, type DecodePackedTask, type FailAnswer, type PackedAnswer, type PcmAnswer, type UplinkEvent } from './messages.js';
import { createChannelDecoder, type ChannelDecoder } from './channel-decoders.js';
import { concatPcm, packAnswer, PcmBuffers, readRecords, type DecodedPart } from './packing.js';
import { Uplinks } from './uplink.js';
import { PcmWindow } from './pcm-window.js';
import { FrameWindow } from './frame-window.js';
import { tidyHeap } from '../native/memory.js';

interface Session {
  /** One decoder per channel: index 0 = channel id 0x01, index 1 = 0x02. */
  channels: ChannelDecoder[];
  /** Samples of the first channel decoded so far: the stream position a window starts at. */
  decoded: number;
  /** How the stream is coded: what a clip's own decoder is made for. */
  params: CodecParams;
  /**
   * The last seconds of a mono stream's audio, while speaker identification is on for the session (WindowTask): its
   * Opus packets, decoded again for a clip, or its PCM for the codecs that are not worth keeping coded.
   */
  window?: PcmWindow | FrameWindow | undefined;
}

/** A window of `samples` for `session`: Opus keeps its packets (a tenth of the PCM or less), other codecs their PCM. */
function windowFor(session: Session, samples: number): PcmWindow | FrameWindow {
  const { params } = session;
  if (params.codec === 'opus' || params.codec === 'opus_fs320') return new FrameWindow(samples, session.decoded, () => createChannelDecoder(params));
  return new PcmWindow(samples, session.decoded);
}

const sessions = new Map<number, Session>();
/** Decode tasks' PCM memory, reused (workers/packing.ts says why). */
const buffers = new PcmBuffers();
const scratch = (samples: number): Int16Array => buffers.scratch(samples);
/** Provider sockets held here (workers/uplink.ts): a channel with an open one sends its PCM there. */
const uplinks = new Uplinks();
/** Samples the current task sent on provider sockets: [key, channel, samples] triples. */
let uplinked: number[] = [];

/** workers/task-thread.ts hands the thread's event channel here (the main thread's InlineRunner adds its own). */
export function events(listener: (e: UplinkEvent) => void): () => void {
  return uplinks.listen(listener);
}

/** A channel's PCM on its provider socket when the shard holds an open one; answers the PCM left to answer with. */
function toUplink(key: number, channel: number, pcm: Int16Array[]): Int16Array[] {
  const taken = uplinks.get(key, channel)?.take(pcm) ?? 0;
  if (taken === 0) return pcm;
  uplinked.push(key, channel, taken);
  return [];
}

function fail(code: FailAnswer['code'], message: string): FailAnswer {
  return { ok: false, code, message };
}

function openSession(key: number, params: CodecParams): Session {
  release(sessions.get(key));
  const channels: ChannelDecoder[] = [];
  for (let i = 0; i < params.channels; i++) channels.push(createChannelDecoder(params, scratch));
  const session: Session = { channels, decoded: 0, params };
  sessions.set(key, session);
  return session;
}

function pcmAnswer(pcm: Int16Array[]): PcmAnswer {
  return moveAnswer<PcmAnswer>({ ok: true, pcm, frames: 0, corruptFrames: 0, recreated: false }, pcm.map((p) => p.buffer as ArrayBuffer));
}

/** Decodes one stream's messages of a task; `params` makes its decoders if this thread does not have them. */
function decodeStream(key: number, params: () => CodecParams, messages: readonly Uint8Array[]): DecodedPart {
  let session = sessions.get(key);
  // Unknown here but known to the pool: this thread replaced a crashed one. Re-create the decoders and go on.
  const recreated = session === undefined;
  session ??= openSession(key, params());
  const { channels } = session;
  if (channels.length === 1) {
    const r = channels[0]!.decode(messages);
    let samples = 0;
    for (const p of r.pcm) samples += p.length;
    const { window } = session;
    if (window instanceof FrameWindow) window.append(messages, samples);
    else if (window !== undefined) for (const p of r.pcm) window.append(p);
    session.decoded += samples;
    return { pcm: [toUplink(key, 0, r.pcm)], frames: r.frames, corruptFrames: r.corruptFrames, recreated };
  }
  // Two channels: the first byte of each message names its channel.
  let routedOut = 0;
  const split: Uint8Array[][] = channels.map(() => []);
  for (const m of messages) {
    const id = m[0];
    if (id === 0x01 || id === 0x02) split[id - 1]!.push(m.subarray(1));
    else routedOut++;
  }
  const results = channels.map((c, i) => c.decode(split[i]!));
  let frames = 0;
  let corruptFrames = routedOut;
  for (const r of results) {
    frames += r.frames;
    corruptFrames += r.corruptFrames;
  }
  return { pcm: results.map((r, ch) => toUplink(key, ch, r.pcm)), frames, corruptFrames, recreated };
}

/** A session's window goes: an Opus window's chunks back to the thread's pool. */
function dropWindow(session: Session | undefined): void {
  if (session?.window instanceof FrameWindow) session.window.dispose();
  if (session !== undefined) session.window = undefined;
}

/** Frees what a session holds without flushing: its decoders and its window. */
function release(session: Session | undefined): void {
  session?.channels.forEach((c) => c.dispose());
  dropWindow(session);
}

/** A decoder that threw on something other than a frame is not trusted further: drop it; the next task re-creates it. */
function dropAfterError(key: number, err: unknown): FailAnswer {
  release(sessions.get(key));
  sessions.delete(key);
  return fail('ENG_ERR_CODEC_FAILED', err instanceof Error ? err.message : String(err));
}

type StreamResult = { key: number; result: DecodedPart | FailAnswer };

/** Puts what this task sent on provider sockets into its answer. */
function withUplinked<T extends { uplinked?: number[] }>(answer: T): T {
  if (uplinked.length > 0) {
    answer.uplinked = uplinked;
    uplinked = [];
  }
  return answer;
}

function packed(parts: readonly StreamResult[]): PackedAnswer {
  const answer = withUplinked(packAnswer(parts, buffers));
  return moveAnswer<PackedAnswer>(answer, [answer.entries.buffer as ArrayBuffer, answer.pcm.buffer as ArrayBuffer]);
}

/** Every stream of the task; one failing stream does not fail the others. */
function decodePacked(task: DecodePackedTask): PackedAnswer {
  buffers.give(task.spare ?? []);
  buffers.reset();
  const byKey = readRecords(task.records);
  const p = task.params;
  const parts: StreamResult[] = [];
  for (let i = 0; i < p.length; i += 4) {
    const key = p[i]!;
    const params = (): CodecParams => ({ codec: CODECS[p[i + 1]!]!, sampleRate: p[i + 2]!, channels: p[i + 3] as 1 | 2 });
    try {
      parts.push({ key, result: decodeStream(key, params, byKey.get(key) ?? []) });
    } catch (err) {
      parts.push({ key, result: dropAfterError(key, err) });
    }
  }
  return packed(parts);
}

function close(key: number, flush: boolean): CodecAnswer {
  const session = sessions.get(key);
  if (session === undefined) return pcmAnswer([]);
  dropWindow(session);
  sessions.delete(key);
  if (!flush) {
    session.channels.forEach((c) => c.dispose());
    return pcmAnswer([]);
  }
  return withUplinked(pcmAnswer(session.channels.map((c, ch) => concatPcm(toUplink(key, ch, [c.end()])))));
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
        try {
          return close(task.key, task.flush);
        } catch (err) {
          return dropAfterError(task.key, err);
        }
      case 'window': {
        const session = sessions.get(task.key);
        // Mono streams only: a two-channel call already says which side is the wearer.
        if (session !== undefined && session.channels.length === 1) {
          dropWindow(session);
          if (task.samples > 0) session.window = windowFor(session, task.samples);
        }
        return { ok: true };
      }
      case 'clip': {
        const clip = sessions.get(task.key)?.window?.read(task.ranges) ?? new Int16Array(0);
        return moveAnswer<ClipAnswer>({ ok: true, clip }, [clip.buffer as ArrayBuffer]);
      }
      case 'uplinkOpen':
      case 'uplinkText':
      case 'uplinkPcm':
      case 'uplinkClose':
        return uplinks.handle(task);
      case 'heap': {
        const h = getHeapStatistics();
        return { ok: true, usedBytes: h.used_heap_size, committedBytes: h.total_heap_size };
      }
      case 'tidy':
        tidyHeap();
        return { ok: true };
    }
  } catch (err) {
    return fail('ENG_ERR_CODEC_FAILED', err instanceof Error ? err.message : String(err));
  }
}
