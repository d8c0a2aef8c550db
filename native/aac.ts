// AAC for one stream: FFmpeg's AAC decoder (LGPL build, scripts/build-libavcodec) through our addon (native/aac.cc).
import { loadAddon } from './addon.js';

interface NativeAacDecoder {
  /** Mono samples written at `offset` (at sampleRate()), or a negative FFmpeg error code. */
  decodeInto(frame: Uint8Array, out: Int16Array, offset: number): number;
  sampleRate(): number;
  close(): void;
}
interface NativeAacModule {
  AacDecoder: new () => NativeAacDecoder;
  /** The FFmpeg release the decoder was built from. */
  ffmpegVersion: string;
}

const native = loadAddon<NativeAacModule>('aac', 'AAC (libavcodec)');

/** FFmpeg release of the linked decoder. */
export const AAC_FFMPEG_VERSION = native.ffmpegVersion;

/** decodeInto()'s answer when `out` lacks the room for the frame (-ENOSPC). */
export const AAC_NO_ROOM = -28;

/** Most mono samples one ADTS frame decodes to: 4 raw data blocks of 1024, doubled by SBR (HE-AAC). */
export const AAC_MAX_FRAME_SAMPLES = 4 * 1024 * 2;

/** One AAC decoder per stream; ADTS frames in, mono Int16 out at the stream's own rate (a stereo stream is mixed down). */
export class AacDecoder {
  readonly #codec = new native.AacDecoder();

  /**
   * Decodes one whole ADTS frame into `out` from `offset`: the samples written (at `sampleRate`), or a negative code:
   * a corrupt frame (the decoder stays usable), or AAC_NO_ROOM when `out` lacks the room (up to AAC_MAX_FRAME_SAMPLES).
   */
  decodeInto(frame: Uint8Array, out: Int16Array, offset: number): number {
    return this.#codec.decodeInto(frame, out, offset);
  }

  /** Output rate of the last frame decoded, in Hz (twice the header's rate for HE-AAC); 0 before the first. */
  get sampleRate(): number {
    return this.#codec.sampleRate();
  }

  /** Frees the native state (large, and unseen by V8) now; the decoder must not be used after. Idempotent. */
  close(): void {
    this.#codec.close();
  }
}
