// Task and answer shapes of the codec shards (workers/decode.ts), shared by engine/codec/ and the thread.
import type { ConnectOutcome } from './ws-client.js';

/** Codec names of the listen query (docs/protocol.md). */
export const CODECS = ['pcm8', 'pcm16', 'opus', 'opus_fs320', 'aac', 'lc3', 'lc3_fs1030'] as const;
export type Codec = (typeof CODECS)[number];

/** Input sample rates each codec accepts, in Hz. */
export const CODEC_SAMPLE_RATES_HZ: Readonly<Record<Codec, readonly number[]>> = {
  // s16le at `sampleRate`; any rate the resampler takes (pcm8 is 8000 and pcm16 16000 in practice).
  pcm8: [8000, 11025, 12000, 16000, 22050, 24000, 32000, 44100, 48000],
  pcm16: [8000, 11025, 12000, 16000, 22050, 24000, 32000, 44100, 48000],
  opus: [8000, 12000, 16000, 24000, 48000],
  opus_fs320: [8000, 12000, 16000, 24000, 48000],
  // The ADTS header carries the real rate; the decoder resamples whatever it finds.
  aac: [8000, 11025, 12000, 16000, 22050, 24000, 32000, 44100, 48000],
  lc3: [8000, 16000, 24000, 32000, 48000],
  lc3_fs1030: [8000, 16000, 24000, 32000, 48000],
};

/** LC3 frame duration every device uses, in microseconds. */
export const LC3_FRAME_US = 10_000;
/** `lc3_fs1030`: 30-byte frames, possibly several back to back in one message. */
export const LC3_FS1030_FRAME_BYTES = 30;

/** Rate of every PCM answer, in Hz. */
export const OUTPUT_SAMPLE_RATE_HZ = 16000;

/** What a session's codec is: the listen query's codec, sample_rate and channels. */
export interface CodecParams {
  codec: Codec;
  /** Input sample rate in Hz. */
  sampleRate: number;
  /** 1, or 2 when every message starts with a channel-id byte (0x01 or 0x02). */
  channels: 1 | 2;
}

/** Why a codec/rate/channels combination is refused, or null when it is accepted. */
export function checkCodecParams(p: { codec: string; sampleRate: number; channels: number }): string | null {
  if (!(CODECS as readonly string[]).includes(p.codec)) return `codec ${p.codec} is not one of ${CODECS.join(', ')}`;
  const rates = CODEC_SAMPLE_RATES_HZ[p.codec as Codec];
  if (!rates.includes(p.sampleRate)) return `sample_rate ${p.sampleRate} is not supported for ${p.codec} (${rates.join(', ')})`;
  if (p.channels !== 1 && p.channels !== 2) return `channels ${p.channels} is not supported (1 or 2)`;
  return null;
}

/** The index of a codec in CODECS (codec parameters travel as numbers in a decode task). */
export function codecIndex(codec: Codec): number {
  return CODECS.indexOf(codec);
}

export interface OpenTask extends CodecParams {
  type: 'open';
  /** The stream's number within its shard. */
  key: number;
}

/**
 * Every stream's staged messages in one buffer (workers/packing.ts records), and for each stream in it
 * [key, codecIndex, sampleRate, channels] so a thread that replaced a crashed one can re-create its decoders.
 */
export interface DecodePackedTask {
  type: 'decodePacked';
  params: Int32Array;
  records: Uint8Array;
  /** Buffers of earlier answers the main thread has read, moved back for the thread to fill again. */
  spare?: ArrayBuffer[];
}

/** Ends a stream in the thread; with `flush`, answers with the PCM the decoders still hold (resampler and AAC tails). */
export interface CloseTask {
  type: 'close';
  key: number;
  /** false: drop the decoders at once (session disposed, pool closing). */
  flush: boolean;
}

/** The thread's V8 heap, for /metrics (the main thread's heap metrics do not include it). */
export interface HeapTask {
  type: 'heap';
}

/**
 * Asks the thread's V8 heap to give memory back: its next full GC, started at once, evacuates fragmented pages and
 * returns the empty ones (native/memory.cc tidy()). Answers OkAnswer.
 */
export interface TidyTask {
  type: 'tidy';
}

/**
 * Starts (or, with `samples` 0, stops) keeping the last `samples` of a mono stream's decoded PCM in the thread
 * (workers/pcm-window.ts), for speaker identification's clips. Answers OkAnswer.
 */
export interface WindowTask {
  type: 'window';
  key: number;
  samples: number;
}

/**
 * Copies a stream's kept PCM out of its window: stream positions (16 kHz samples since the session's first audio) as
 * [from, to) pairs, clamped to what the window still holds, concatenated. Answers ClipAnswer.
 */
export interface ClipTask {
  type: 'clip';
  key: number;
  ranges: number[];
}

/** How to open a provider socket (workers/uplink.ts). */
export interface UplinkOptions {
  url: string;
  headers: Record<string, string>;
  /** Longest message taken from the provider, in bytes. */
  maxPayload: number;
  /** Bytes queued on the socket beyond which the provider is deemed stuck (a 'stuck' event). */
  maxBufferedBytes: number;
  /** A decoded batch shorter than this waits for the next one (providers refuse messages under 20 ms). */
  minSamples: number;
  /** A text message sent as soon as the socket is open, before any audio (provider_b's config frame). */
  firstText?: string;
}

/** Opens a provider socket in the shard for one channel of stream `key`. */
export interface UplinkOpenTask extends UplinkOptions {
  type: 'uplinkOpen';
  key: number;
  channel: number;
}

/** A text message on a channel's provider socket; `flush` sends a waiting rest of PCM first. */
export interface UplinkTextTask {
  type: 'uplinkText';
  key: number;
  channel: number;
  text: string;
  flush: boolean;
}

/** PCM that reached the main thread for a channel whose socket is in the shard (the decoders' tail at close). */
export interface UplinkPcmTask {
  type: 'uplinkPcm';
  key: number;
  channel: number;
  pcm: Int16Array;
}

/** Frees a channel's provider socket: at once, or with a close frame of `code` when it is open. */
export interface UplinkCloseTask {
  type: 'uplinkClose';
  key: number;
  channel: number;
  code?: number;
}

/** The tasks of a channel's provider socket, answered by workers/uplink.ts Uplinks.handle(). */
export type UplinkTask = UplinkOpenTask | UplinkTextTask | UplinkPcmTask | UplinkCloseTask;

export type CodecTask = OpenTask | DecodePackedTask | CloseTask | HeapTask | TidyTask | WindowTask | ClipTask | UplinkTask;

/** How a provider socket's opening went: the handshake's status and Retry-After when the provider refused. */
export type UplinkOpenAnswer = ConnectOutcome;

/** What a shard's provider socket tells the main thread, outside any task's answer. */
export type UplinkEvent =
  | { key: number; channel: number; kind: 'text'; text: string }
  | { key: number; channel: number; kind: 'close'; code: number; reason: string }
  | { key: number; channel: number; kind: 'stuck' };

export interface PcmAnswer {
  ok: true;
  /** 16 kHz mono Int16 PCM, one array per channel (index 0 = channel 0x01). */
  pcm: Int16Array[];
  /** Messages (codec frames, or LC3 frames split out of messages) decoded in this task. */
  frames: number;
  /** Frames that failed to decode: counted and skipped (concealed where the codec offers PLC). */
  corruptFrames: number;
  /** Whether the decoders had to be re-created (a new thread after a crash). */
  recreated: boolean;
  /** Samples the shard sent on its provider sockets instead of answering with them: [key, channel, samples] triples. */
  uplinked?: number[];
}

export interface OkAnswer {
  ok: true;
}

/** A clip of a stream's window (ClipTask): empty when the stream keeps no window or the ranges fell out of it. */
export interface ClipAnswer {
  ok: true;
  clip: Int16Array;
}

export interface HeapAnswer {
  ok: true;
  /** V8's used and committed heap of the thread, in bytes. */
  usedBytes: number;
  committedBytes: number;
}

/** Errors cross threads as data: `engine/codec/stream.ts` rebuilds an EngineError from `code`. */
export interface FailAnswer {
  ok: false;
  code: 'ENG_ERR_CODEC_UNSUPPORTED' | 'ENG_ERR_CODEC_FAILED' | 'ENG_ERR_INTERNAL';
  message: string;
}

/** The answer to a DecodePackedTask (workers/packing.ts): one entry per stream, all PCM in one buffer. */
export interface PackedAnswer {
  ok: true;
  entries: Int32Array;
  pcm: Int16Array;
  failures: { key: number; code: FailAnswer['code']; message: string }[];
  /** Samples the shard sent on its provider sockets instead of answering with them: [key, channel, samples] triples. */
  uplinked?: number[];
}

export type CodecAnswer = PcmAnswer | OkAnswer | FailAnswer | PackedAnswer | HeapAnswer | ClipAnswer | UplinkOpenAnswer;

/** Buffers an answer moves to the main thread (workers/task-thread.ts reads them); a WeakMap so answers stay plain. */
const moves = new WeakMap<object, ArrayBuffer[]>();

/** Marks `buffers` of an answer to be moved to the main thread instead of copied. */
export function moveAnswer<T extends object>(value: T, buffers: ArrayBuffer[]): T {
  moves.set(value, buffers);
  return value;
}

/** The buffers moveAnswer() marked on `value` (none for an unmarked answer). */
export function movesOf(value: unknown): ArrayBuffer[] {
  return (typeof value === 'object' && value !== null && moves.get(value)) || [];
}
