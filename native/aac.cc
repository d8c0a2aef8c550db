// N-API addon over FFmpeg's AAC decoder (LGPL-only, linked statically by scripts/build-libavcodec): one ADTS frame in,
// mono Int16 out into a caller-owned array; in process, as an ffmpeg process per stream cost many times the codec.
#define NAPI_UTIL_ERROR "ERR_AAC_NAPI"
#include "napi-util.h"
extern "C" {
#include <libavcodec/avcodec.h>
#include <libavutil/avutil.h>
}
#include <cmath>
#include <cstdint>

namespace {

using napi_util::TypedArrayOf;
const auto Throw = napi_util::ThrowRange;

struct Aac {
  AVCodecContext* ctx = nullptr;
  AVPacket* packet = nullptr;
  AVFrame* frame = nullptr;
};

// Frees the codec's state (idempotent); the struct stays until the JS object is collected.
void Close(Aac* aac) {
  av_frame_free(&aac->frame);
  av_packet_free(&aac->packet);
  avcodec_free_context(&aac->ctx);
}

void Free(Aac* aac) {
  Close(aac);
  delete aac;
}

void Finalize(napi_env, void* data, void*) { Free(static_cast<Aac*>(data)); }

// Opens a decoder for ADTS input: the stream's parameters come from each frame's header.
Aac* Open() {
  const AVCodec* codec = avcodec_find_decoder(AV_CODEC_ID_AAC);
  if (codec == nullptr) return nullptr;
  Aac* aac = new Aac();
  aac->ctx = avcodec_alloc_context3(codec);
  aac->packet = av_packet_alloc();
  aac->frame = av_frame_alloc();
  if (aac->ctx == nullptr || aac->packet == nullptr || aac->frame == nullptr || avcodec_open2(aac->ctx, codec, nullptr) < 0) {
    Free(aac);
    return nullptr;
  }
  return aac;
}

// new AacDecoder()
napi_value New(napi_env env, napi_callback_info info) {
  napi_value self;
  CHECK(env, napi_get_cb_info(env, info, nullptr, nullptr, &self, nullptr));
  Aac* aac = Open();
  if (aac == nullptr) return napi_util::ThrowError(env, "ERR_AAC_OPEN", "could not open the AAC decoder");
  napi_status st = napi_wrap(env, self, aac, Finalize, nullptr, nullptr);
  if (st != napi_ok) {
    Free(aac);
    return napi_util::ThrowError(env, NAPI_UTIL_ERROR, "napi_wrap");
  }
  return self;
}

// The decoder wrapped in `this`, nullptr when there is none or it was closed.
Aac* Self(napi_env env, napi_callback_info info, size_t* argc, napi_value* args) {
  Aac* aac = napi_util::Unwrapped<Aac>(env, info, argc, args);
  return aac == nullptr || aac->ctx == nullptr ? nullptr : aac;
}

// Mixes a decoded frame (float planar, as FFmpeg's AAC decoder gives) down to mono s16 at `out`.
void MixInto(const AVFrame* f, int16_t* out) {
  const int channels = f->ch_layout.nb_channels;
  const float scale = 32768.0f / static_cast<float>(channels);  // as FFmpeg converts float to s16
  const float* const* planes = reinterpret_cast<const float* const*>(f->extended_data);
  for (int i = 0; i < f->nb_samples; i++) {
    float sum = 0;
    for (int c = 0; c < channels; c++) sum += planes[c][i];
    float v = sum * scale;
    out[i] = static_cast<int16_t>(v >= 32767.0f ? 32767 : v <= -32768.0f ? -32768 : lrintf(v));
  }
}

// decodeInto(frame: Uint8Array, out: Int16Array, offset: number): mono samples written at `offset` (at
// sampleRate()), or a negative code: AVERROR_INVALIDDATA and the like for a corrupt frame (the decoder stays usable),
// -ENOSPC when `out` lacks the room (nothing is written then; the frame is lost).
napi_value DecodeInto(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value args[3];
  Aac* aac = Self(env, info, &argc, args);
  if (aac == nullptr) return Throw(env, "ERR_AAC_ARGS", "not an open AacDecoder");
  if (argc < 3) return Throw(env, "ERR_AAC_ARGS", "expected (frame, out, offset)");
  void* inPtr = nullptr;
  size_t inLen = 0;
  if (!TypedArrayOf(env, args[0], napi_uint8_array, &inPtr, &inLen)) return Throw(env, "ERR_AAC_ARGS", "frame must be a Uint8Array");
  void* outPtr = nullptr;
  size_t outLen = 0;
  if (!TypedArrayOf(env, args[1], napi_int16_array, &outPtr, &outLen)) return Throw(env, "ERR_AAC_ARGS", "out must be an Int16Array");
  int64_t at = 0;
  CHECK(env, napi_get_value_int64(env, args[2], &at));
  if (at < 0 || static_cast<size_t>(at) > outLen) return Throw(env, "ERR_AAC_ARGS", "offset outside out");

  // A packet without a buffer is copied by libavcodec into a padded one, as its bit readers need.
  aac->packet->data = static_cast<uint8_t*>(inPtr);
  aac->packet->size = static_cast<int>(inLen);
  int rc = inLen == 0 ? AVERROR_INVALIDDATA : avcodec_send_packet(aac->ctx, aac->packet);
  aac->packet->data = nullptr;
  aac->packet->size = 0;
  int written = 0;
  while (rc >= 0) {
    int got = avcodec_receive_frame(aac->ctx, aac->frame);
    if (got == AVERROR(EAGAIN) || got == AVERROR_EOF) break;
    if (got < 0) {
      rc = got;
      break;
    }
    const AVFrame* f = aac->frame;
    if (f->format != AV_SAMPLE_FMT_FLTP || f->ch_layout.nb_channels < 1) {
      rc = AVERROR_INVALIDDATA;
    } else if (static_cast<size_t>(at + written + f->nb_samples) > outLen) {
      rc = -ENOSPC;
    } else {
      MixInto(f, static_cast<int16_t*>(outPtr) + at + written);
      written += f->nb_samples;
    }
    av_frame_unref(aac->frame);
  }
  napi_value result;
  CHECK(env, napi_create_int32(env, rc < 0 ? rc : written, &result));
  return result;
}

// sampleRate(): the output rate of the last frame decoded (twice the header's rate for HE-AAC), 0 before any.
napi_value SampleRate(napi_env env, napi_callback_info info) {
  size_t argc = 0;
  Aac* aac = Self(env, info, &argc, nullptr);
  if (aac == nullptr) return Throw(env, "ERR_AAC_ARGS", "not an open AacDecoder");
  napi_value result;
  CHECK(env, napi_create_int32(env, aac->ctx->sample_rate, &result));
  return result;
}

// close(): frees the decoder's native state now rather than when V8 collects the object (a thread with a small heap
// seldom runs the full GC that would); any later use throws. Idempotent.
napi_value CloseDecoder(napi_env env, napi_callback_info info) {
  size_t argc = 0;
  Aac* aac = napi_util::Unwrapped<Aac>(env, info, &argc, nullptr);
  if (aac != nullptr) Close(aac);
  return nullptr;
}

napi_value Init(napi_env env, napi_value exports) {
  // Corrupt frames are answered as codes and counted by the caller; FFmpeg's own messages on stderr would bypass the
  // structured log.
  av_log_set_level(AV_LOG_QUIET);
  napi_property_descriptor props[] = {
      {"decodeInto", nullptr, DecodeInto, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"sampleRate", nullptr, SampleRate, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"close", nullptr, CloseDecoder, nullptr, nullptr, nullptr, napi_default, nullptr},
  };
  napi_value cls;
  CHECK(env, napi_define_class(env, "AacDecoder", NAPI_AUTO_LENGTH, New, nullptr, 3, props, &cls));
  CHECK(env, napi_set_named_property(env, exports, "AacDecoder", cls));
  napi_value version;
  CHECK(env, napi_create_string_utf8(env, av_version_info(), NAPI_AUTO_LENGTH, &version));
  CHECK(env, napi_set_named_property(env, exports, "ffmpegVersion", version));
  return exports;
}

}  // namespace

NAPI_MODULE(NODE_GYP_MODULE_NAME, Init)
