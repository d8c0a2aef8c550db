// N-API addon over Debian's libopus: a mono decoder that writes into a caller-owned Int16Array, where @discordjs/opus
// (kept for encoding fixtures) allocates a Buffer per packet and keeps an output buffer beside every decoder.
#define NAPI_UTIL_ERROR "ERR_OPUS_NAPI"
#include "napi-util.h"
#include <opus.h>
#include <cstdint>

namespace {

using napi_util::TypedArrayOf;
const auto Throw = napi_util::ThrowRange;

void Finalize(napi_env, void* data, void*) { opus_decoder_destroy(static_cast<OpusDecoder*>(data)); }

// new OpusDecoder(sampleRateHz): mono, output at 8000, 12000, 16000, 24000 or 48000 Hz.
napi_value New(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value arg;
  napi_value self;
  CHECK(env, napi_get_cb_info(env, info, &argc, &arg, &self, nullptr));
  int32_t rate = 0;
  if (argc < 1 || napi_get_value_int32(env, arg, &rate) != napi_ok) return Throw(env, "ERR_OPUS_ARGS", "expected (sampleRateHz)");
  int err = OPUS_OK;
  OpusDecoder* dec = opus_decoder_create(rate, 1, &err);
  if (err != OPUS_OK || dec == nullptr) return Throw(env, "ERR_OPUS_ARGS", "unsupported Opus output rate");
  CHECK(env, napi_wrap(env, self, dec, Finalize, nullptr, nullptr));
  return self;
}

const auto Self = napi_util::Unwrapped<OpusDecoder>;

// decodeInto(packet: Uint8Array | null, out: Int16Array, offset: number, samples: number): samples written at
// `offset`, or a negative libopus error (OPUS_INVALID_PACKET for a corrupt packet, OPUS_BUFFER_TOO_SMALL when the
// packet holds more than `out` has room for). A null or empty packet conceals `samples` samples (packet-loss
// concealment); a real packet may write up to the room left in `out`.
napi_value DecodeInto(napi_env env, napi_callback_info info) {
  size_t argc = 4;
  napi_value args[4];
  OpusDecoder* dec = Self(env, info, &argc, args);
  if (dec == nullptr) return Throw(env, "ERR_OPUS_ARGS", "not an OpusDecoder");
  if (argc < 4) return Throw(env, "ERR_OPUS_ARGS", "expected (packet, out, offset, samples)");
  void* inPtr = nullptr;
  size_t inLen = 0;
  napi_valuetype t;
  CHECK(env, napi_typeof(env, args[0], &t));
  if (t != napi_null && t != napi_undefined && !TypedArrayOf(env, args[0], napi_uint8_array, &inPtr, &inLen))
    return Throw(env, "ERR_OPUS_ARGS", "packet must be a Uint8Array or null");
  const unsigned char* in = inLen == 0 ? nullptr : static_cast<const unsigned char*>(inPtr);
  void* outPtr = nullptr;
  size_t outLen = 0;
  if (!TypedArrayOf(env, args[1], napi_int16_array, &outPtr, &outLen)) return Throw(env, "ERR_OPUS_ARGS", "out must be an Int16Array");
  int64_t at = 0;
  int32_t samples = 0;
  CHECK(env, napi_get_value_int64(env, args[2], &at));
  CHECK(env, napi_get_value_int32(env, args[3], &samples));
  if (at < 0 || static_cast<size_t>(at) > outLen) return Throw(env, "ERR_OPUS_ARGS", "offset outside out");
  int room = static_cast<int>(outLen - static_cast<size_t>(at));
  int frame = in == nullptr ? (samples < room ? samples : room) : room;
  int rc = frame <= 0 ? OPUS_BUFFER_TOO_SMALL
                      : opus_decode(dec, in, static_cast<opus_int32>(inLen), static_cast<opus_int16*>(outPtr) + at, frame, 0);
  napi_value result;
  CHECK(env, napi_create_int32(env, rc, &result));
  return result;
}

// free(): frees the libopus state now rather than when V8 collects the object, which a codec thread with a
// small heap and nothing left to do may not for minutes; any later use throws. Idempotent.
napi_value Free(napi_env env, napi_callback_info info) {
  size_t argc = 0;
  napi_value self;
  CHECK(env, napi_get_cb_info(env, info, &argc, nullptr, &self, nullptr));
  void* data = nullptr;
  // Unwrapping also drops the finalizer, so the state is destroyed once; a second call finds nothing to unwrap.
  if (napi_remove_wrap(env, self, &data) == napi_ok && data != nullptr) opus_decoder_destroy(static_cast<OpusDecoder*>(data));
  return nullptr;
}

napi_value Init(napi_env env, napi_value exports) {
  napi_property_descriptor props[] = {
      {"decodeInto", nullptr, DecodeInto, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"free", nullptr, Free, nullptr, nullptr, nullptr, napi_default, nullptr},
  };
  napi_value cls;
  CHECK(env, napi_define_class(env, "OpusDecoder", NAPI_AUTO_LENGTH, New, nullptr, 2, props, &cls));
  CHECK(env, napi_set_named_property(env, exports, "OpusDecoder", cls));
  napi_value size;
  CHECK(env, napi_create_int32(env, opus_decoder_get_size(1), &size));
  CHECK(env, napi_set_named_property(env, exports, "decoderBytes", size));
  return exports;
}

}  // namespace

NAPI_MODULE(NODE_GYP_MODULE_NAME, Init)
