// AAC (ADTS) decoding through an ffmpeg child process per stream: ffmpeg stays a separate program, never linked.
//
// Rationale: every in-process AAC decoder we could link is GPL (faad2, a GPL libavcodec build) or under a
// restrictive licence (fdk-aac). A subprocess keeps the project MIT; its cost (~10 MB RSS and a pipe per
// stream) is measured in bench and is acceptable because AAC is rare among the devices (Opus and LC3 dominate).
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';

/** Sampling frequencies indexed by the ADTS `sampling_frequency_index`. */
const ADTS_RATES_HZ = [96000, 88200, 64000, 48000, 44100, 32000, 24000, 22050, 16000, 12000, 11025, 8000, 7350];

export interface AdtsFrame {
  /** Byte offset and length of the whole frame (header included) in the message. */
  offset: number;
  length: number;
  /** PCM samples the frame decodes to, at `sampleRate`. */
  samples: number;
  sampleRate: number;
}

/** Splits a message into ADTS frames; returns null if the bytes are not a sequence of whole ADTS frames. */
export function splitAdts(bytes: Uint8Array): AdtsFrame[] | null {
  const frames: AdtsFrame[] = [];
  let off = 0;
  while (off < bytes.length) {
    if (bytes.length - off < 7) return null;
    const b1 = bytes[off + 1]!;
    if (bytes[off] !== 0xff || (b1 & 0xf6) !== 0xf0) return null; // syncword 0xFFF, layer 00
    const b2 = bytes[off + 2]!;
    const rate = ADTS_RATES_HZ[(b2 >> 2) & 0x0f];
    const len = ((bytes[off + 3]! & 0x03) << 11) | (bytes[off + 4]! << 3) | (bytes[off + 5]! >> 5);
    const blocks = (bytes[off + 6]! & 0x03) + 1;
    const headerLen = (b1 & 0x01) === 1 ? 7 : 9;
    if (rate === undefined || len < headerLen || off + len > bytes.length) return null;
    frames.push({ offset: off, length: len, samples: 1024 * blocks, sampleRate: rate });
    off += len;
  }
  return frames;
}

/** Resolves once the process has written PCM up to a mark, or at a deadline (ffmpeg holds back a few ms). */
interface Waiter {
  samples: number;
  resolve: () => void;
}

/** One ffmpeg process decoding one ADTS stream to 16 kHz mono s16le. */
export class AacFfmpegDecoder {
  readonly #proc: ChildProcessWithoutNullStreams;
  #chunks: Buffer[] = [];
  #bytes = 0;
  /** Samples written by ffmpeg so far, and samples expected from the frames fed so far (both at 16 kHz). */
  #producedSamples = 0;
  #expectedSamples = 0;
  /** 16 kHz samples of the last frame fed: ffmpeg's ADTS parser holds one frame until the next one's header arrives. */
  #lastFrameSamples = 0;
  #waiter: Waiter | null = null;
  #exited: Promise<void>;
  #failed: Error | null = null;

  /**
   * @param ffmpegPath the ffmpeg executable
   */
  constructor(ffmpegPath = 'ffmpeg') {
    this.#proc = spawn(
      ffmpegPath,
      [
        '-hide_banner', '-loglevel', 'error', '-nostdin',
        // Low latency: no probing beyond the first header, no input buffering, a packet out per frame.
        '-probesize', '32', '-analyzeduration', '0', '-fflags', 'nobuffer', '-flags', 'low_delay',
        '-f', 'aac', '-i', 'pipe:0',
        '-f', 's16le', '-ac', '1', '-ar', '16000', '-flush_packets', '1', 'pipe:1',
      ],
      { stdio: ['pipe', 'pipe', 'pipe'] },
    );
    this.#proc.stdout.on('data', (chunk: Buffer) => {
      this.#chunks.push(chunk);
      this.#bytes += chunk.length;
      this.#producedSamples += chunk.length / 2;
      if (this.#waiter !== null && this.#producedSamples >= this.#waiter.samples) this.#waiter.resolve();
    });
    this.#proc.stderr.resume(); // errors are per frame and already counted by the ADTS check; never log content
    this.#proc.stdin.on('error', (err) => {
      this.#failed ??= err;
    });
    this.#exited = new Promise((resolve) => {
      this.#proc.on('close', () => {
        this.#waiter?.resolve();
        resolve();
      });
      this.#proc.on('error', (err) => {
        this.#failed ??= err;
        this.#waiter?.resolve();
        resolve();
      });
    });
  }

  /** Set if the process could not start or its pipe broke; the stream is then unusable. */
  get failure(): Error | null {
    return this.#failed;
  }

  /** Feeds whole ADTS frames (already checked by `splitAdts`). */
  write(bytes: Uint8Array, frames: readonly AdtsFrame[]): void {
    for (const f of frames) {
      this.#lastFrameSamples = (f.samples * 16000) / f.sampleRate;
      this.#expectedSamples += this.#lastFrameSamples;
    }
    this.#proc.stdin.write(bytes);
  }

  /**
   * Takes the PCM written so far, after waiting (at most `maxWaitMs`) for ffmpeg to catch up with every frame fed
   * but the last (its parser holds that one until the next header or the end), minus `slackSamples` (its
   * resampler also holds a few samples back). Latency is thus one AAC frame (21 ms at 48 kHz, 64 ms at 16 kHz).
   */
  async take(maxWaitMs = 200, slackSamples = 64): Promise<Int16Array> {
    const mark = Math.floor(this.#expectedSamples - this.#lastFrameSamples) - slackSamples;
    if (this.#producedSamples < mark && this.#failed === null) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(done, maxWaitMs);
        const waiter = { samples: mark, resolve: done };
        this.#waiter = waiter;
        function done(): void {
          clearTimeout(timer);
          resolve();
        }
      });
      this.#waiter = null;
    }
    return this.#drain();
  }

  /** Ends the stream: closes ffmpeg's input, waits for it to exit and returns the rest of the PCM. */
  async end(): Promise<Int16Array> {
    this.#proc.stdin.end();
    await this.#exited;
    return this.#drain();
  }

  /** Kills the process without waiting for its output (session gone). */
  kill(): void {
    this.#proc.kill('SIGKILL');
  }

  #drain(): Int16Array {
    // Whole samples only; an odd trailing byte waits for the next chunk.
    const whole = this.#bytes & ~1;
    const out = new Int16Array(whole / 2);
    const bytes = new Uint8Array(out.buffer);
    let at = 0;
    const rest: Buffer[] = [];
    for (const c of this.#chunks) {
      const n = Math.min(c.length, whole - at);
      bytes.set(c.subarray(0, n), at);
      at += n;
      if (n < c.length) rest.push(c.subarray(n));
    }
    this.#chunks = rest;
    this.#bytes -= whole;
    return out;
  }
}
