// One decoder per channel of a session, for each codec: bytes in, 16 kHz mono Int16 PCM out (runs in a codec shard).
import { Lc3Decoder, LC3_MAX_FRAME_BYTES, LC3_MIN_FRAME_BYTES } from '../native/index.js';
import { maxPacketSamples, OpusDecoder, OPUS_BUFFER_TOO_SMALL } from '../native/opus.js';
import { AacDecoder } from '../native/aac.js';
import { splitAdts, type AdtsFrame } from '../native/adts.js';
import { LC3_FRAME_US, LC3_FS1030_FRAME_BYTES, OUTPUT_SAMPLE_RATE_HZ, type CodecParams } from './messages.js';
import { Resampler } from './resample.js';

export interface ChannelResult {
  /** 16 kHz PCM chunks in order. */
  pcm: Int16Array[];
  frames: number;
  corruptFrames: number;
}

export interface ChannelDecoder {
  /** Decodes this channel's messages (channel-id byte already removed). */
  decode(messages: readonly Uint8Array[]): ChannelResult;
  /** Ends the stream and returns the PCM the decoder still holds. */
  end(): Int16Array;
  /** Frees what the decoder holds without waiting (a thread or session going away). */
  dispose(): void;
}

/** Samples of `bytes` read as s16le; a view when aligned, else a copy. */
function s16le(bytes: Uint8Array): Int16Array {
  if ((bytes.byteOffset & 1) === 0) return new Int16Array(bytes.buffer, bytes.byteOffset, bytes.byteLength >> 1);
  const copy = new Int16Array(bytes.byteLength >> 1);
  new Uint8Array(copy.buffer).set(bytes.subarray(0, copy.byteLength));
  return copy;
}

/**
 * pcm8 / pcm16: s16le at the session's sample rate, resampled to 16 kHz. Each message is read where it lies (a
 * sample split between two messages is put together; an odd byte waits for the next message), and a batch's
 * messages go through the resampler as one run (one output array per batch, not per 10 ms message).
 */
class PcmDecoder implements ChannelDecoder {
  readonly #resampler: Resampler;
  #carry: number | null = null;
  constructor(sampleRate: number) {
    this.#resampler = new Resampler(sampleRate, OUTPUT_SAMPLE_RATE_HZ);
  }
  decode(messages: readonly Uint8Array[]): ChannelResult {
    const runs: Int16Array[] = [];
    for (const m of messages) {
      let bytes = m;
      if (this.#carry !== null && bytes.length > 0) {
        runs.push(new Int16Array([this.#carry | (bytes[0]! << 8)])); // little-endian: the carried byte is the low one
        this.#carry = null;
        bytes = bytes.subarray(1);
      }
      if ((bytes.length & 1) === 1) {
        this.#carry = bytes[bytes.length - 1]!;
        bytes = bytes.subarray(0, bytes.length - 1);
      }
      if (bytes.length > 0) runs.push(s16le(bytes));
    }
    return { pcm: this.#resampler.pushAll(runs), frames: messages.length, corruptFrames: 0 };
  }
  end(): Int16Array {
    return this.#resampler.flush();
  }
  dispose(): void {}
}

/** The longest Opus packet at the output rate. */
const MAX_PACKET_SAMPLES = maxPacketSamples(OUTPUT_SAMPLE_RATE_HZ);

/**
 * opus / opus_fs320: one packet per message, decoded straight at 16 kHz (libopus decodes any stream at any rate) into
 * one array per batch. A packet longer than the nominal frame (Opus allows up to 120 ms) grows the array.
 */
class OpusChannelDecoder implements ChannelDecoder {
  readonly #decoder = new OpusDecoder(OUTPUT_SAMPLE_RATE_HZ);
  /** Samples concealed for a lost or corrupt packet: the codec's nominal frame. */
  readonly #frameSamples: number;
  readonly #scratch: Scratch;
  constructor(frameSamples: number, scratch: Scratch) {
    this.#frameSamples = frameSamples;
    this.#scratch = scratch;
  }
  decode(messages: readonly Uint8Array[]): ChannelResult {
    const nominal = this.#frameSamples;
    const samples = messages.length * nominal;
    let out = this.#scratch(samples);
    let at = 0;
    let corruptFrames = 0;
    for (let i = 0; i < messages.length; i++) {
      const m = messages[i]!;
      let n = m.length === 0 ? this.#decoder.concealInto(nominal, out, at) : this.#decoder.decodeInto(m, out, at);
      if (n === OPUS_BUFFER_TOO_SMALL) {
        const grown = new Int16Array(at + MAX_PACKET_SAMPLES + (messages.length - i - 1) * nominal);
        grown.set(out.subarray(0, at));
        out = grown;
        n = this.#decoder.decodeInto(m, out, at);
      }
      if (n < 0) {
        corruptFrames++;
        n = this.#decoder.concealInto(nominal, out, at);
      }
      at += Math.max(0, n);
    }
    return { pcm: [at === out.length ? out : out.subarray(0, at)], frames: messages.length, corruptFrames };
  }
  end(): Int16Array {
    this.#decoder.release();
    return new Int16Array(0);
  }
  dispose(): void {
    this.#decoder.release();
  }
}

/**
 * lc3 / lc3_fs1030: 10 ms frames. `lc3_fs1030` splits each message into 30-byte frames; bare `lc3` takes the whole
 * message as one frame (its size sets the bitrate). Undecodable frames are concealed (liblc3 PLC) and counted.
 */
class Lc3ChannelDecoder implements ChannelDecoder {
  readonly #decoder: Lc3Decoder;
  readonly #resampler: Resampler;
  readonly #fixedFrameBytes: number | null;
  readonly #scratch: Scratch;
  constructor(sampleRate: number, fixedFrameBytes: number | null, scratch: Scratch) {
    this.#decoder = new Lc3Decoder(LC3_FRAME_US, sampleRate);
    this.#resampler = new Resampler(sampleRate, OUTPUT_SAMPLE_RATE_HZ);
    this.#fixedFrameBytes = fixedFrameBytes;
    this.#scratch = scratch;
  }
  decode(messages: readonly Uint8Array[]): ChannelResult {
    const size = this.#fixedFrameBytes;
    const frames: (Uint8Array | null)[] = [];
    let corruptFrames = 0;
    for (const m of messages) {
      if (size === null) {
        frames.push(m);
        continue;
      }
      const whole = Math.floor(m.length / size);
      for (let i = 0; i < whole; i++) frames.push(m.subarray(i * size, (i + 1) * size));
      // A ragged tail is not a frame: count it, conceal nothing (we cannot tell how much audio it was).
      if (m.length % size !== 0) corruptFrames++;
    }
    const n = this.#decoder.frameSamples;
    // Every frame is decoded or concealed into its place, so scratch memory needs no clearing. At 16 kHz the
    // resampler hands `out` itself back; otherwise it copies what it keeps.
    const out = this.#scratch(frames.length * n);
    for (let i = 0; i < frames.length; i++) {
      const f = frames[i]!;
      const lost = f === null || f.length === 0;
      if (!lost && (f.length < LC3_MIN_FRAME_BYTES || f.length > LC3_MAX_FRAME_BYTES)) {
        corruptFrames++;
        this.#decoder.decodeInto(null, out, i * n);
        continue;
      }
      const concealed = this.#decoder.decodeInto(lost ? null : f, out, i * n);
      if (concealed && !lost) corruptFrames++;
    }
    return { pcm: [this.#resampler.push(out)], frames: frames.length, corruptFrames };
  }
  end(): Int16Array {
    this.#decoder.release();
    return this.#resampler.flush();
  }
  dispose(): void {
    this.#decoder.release();
  }
}

/**
 * aac: one or more whole ADTS frames per message, decoded in-process (native/aac.ts), mixed to mono and resampled
 * from the stream's own rate (the header's, doubled by HE-AAC's SBR) to 16 kHz. A message that is not whole ADTS
 * frames is counted and skipped (how much audio it held is unknown); a frame that fails to decode is counted and
 * stands as its length of silence, so what follows keeps its time.
 */
class AacChannelDecoder implements ChannelDecoder {
  readonly #decoder = new AacDecoder();
  #resampler: Resampler | null = null;
  decode(messages: readonly Uint8Array[]): ChannelResult {
    const split: AdtsFrame[][] = [];
    let room = 0;
    let corruptFrames = 0;
    for (const m of messages) {
      const adts = splitAdts(m);
      if (adts === null || adts.length === 0) corruptFrames++;
      for (const f of adts ?? []) room += 2 * f.samples; // SBR doubles; nothing else makes a frame longer
      split.push(adts ?? []);
    }
    // Decoded samples gather at one rate in `out`; a change of rate (the first frame, or a stream that changes) sends
    // what gathered through the resampler it was made for.
    const out = new Int16Array(room);
    const pcm: Int16Array[] = [];
    let from = 0;
    let at = 0;
    let frames = 0;
    const switchTo = (rate: number): void => {
      if (this.#resampler?.inRate === rate) return;
      if (this.#resampler !== null) {
        if (at > from) pcm.push(this.#resampler.push(out.subarray(from, at)));
        pcm.push(this.#resampler.flush());
      }
      from = at;
      this.#resampler = new Resampler(rate, OUTPUT_SAMPLE_RATE_HZ);
    };
    for (let i = 0; i < messages.length; i++) {
      const m = messages[i]!;
      for (const f of split[i]!) {
        frames++;
        const n = this.#decoder.decodeInto(m.subarray(f.offset, f.offset + f.length), out, at);
        if (n >= 0) {
          switchTo(this.#decoder.sampleRate); // known once a frame has decoded; [at, at + n) is not yet gathered
          at += n;
          continue;
        }
        corruptFrames++;
        const rate = this.#resampler?.inRate ?? f.sampleRate;
        switchTo(rate);
        const silence = Math.min(Math.round((f.samples * rate) / f.sampleRate), 2 * f.samples);
        out.fill(0, at, at + silence);
        at += silence;
      }
    }
    if (this.#resampler !== null && at > from) pcm.push(this.#resampler.push(out.subarray(from, at)));
    return { pcm, frames, corruptFrames };
  }
  end(): Int16Array {
    this.#decoder.close();
    return this.#resampler?.flush() ?? new Int16Array(0);
  }
  dispose(): void {
    this.#decoder.close();
  }
}

/**
 * Memory a decoder may write a batch's PCM into instead of a fresh array: valid only until the caller's task ends,
 * so the caller copies the result out before (workers/packing.ts PcmBuffers).
 */
export type Scratch = (samples: number) => Int16Array;

/** A fresh array each time: what decoders outside a codec shard write into. */
const freshArrays: Scratch = (samples) => new Int16Array(samples);

/** `scratch`: where Opus and LC3 decoders write (the codec shards' reused task memory); fresh arrays without it. */
export function createChannelDecoder(p: CodecParams, scratch: Scratch = freshArrays): ChannelDecoder {
  switch (p.codec) {
    case 'pcm8':
    case 'pcm16':
      return new PcmDecoder(p.sampleRate);
    case 'opus':
      return new OpusChannelDecoder(160, scratch);
    case 'opus_fs320':
      return new OpusChannelDecoder(320, scratch);
    case 'lc3':
      return new Lc3ChannelDecoder(p.sampleRate, null, scratch);
    case 'lc3_fs1030':
      return new Lc3ChannelDecoder(p.sampleRate, LC3_FS1030_FRAME_BYTES, scratch);
    case 'aac':
      return new AacChannelDecoder();
  }
}
