// N-API addon over Debian's liblc3: per-stream LC3 decoder and encoder objects (plain node_api.h, no node-addon-api).
#define NAPI_UTIL_ERROR "ERR_LC3_NAPI"
#include "napi-util.h"
#include <lc3.h>
#include <cstdlib>
#include <cstring>
#include <cstdint>

namespace {

struct Codec {
  void* mem = nullptr;
  lc3_decoder_t dec = nullptr;
  lc3_encoder_t enc = nullptr;
  int dtUs = 0;
  int srHz = 0;
  int frameSamples = 0;
};

void Finalize(napi_env, void* data, void*) {
  Codec* c = static_cast<Codec*>(data);
  std::free(c->mem);
  delete c;
}

const auto Throw = napi_util::ThrowRange;

// Reads (dtUs, srHz) and allocates the codec memory; `encoder` picks which side.
napi_value Construct(napi_env env, napi_callback_info info, bool encoder) {
  size_t argc = 2;
  napi_value args[2];
  napi_value self;
  CHECK(env, napi_get_cb_info(env, info, &argc, args, &self, nullptr));
  int32_t dtUs = 0, srHz = 0;
  if (argc < 2 || napi_get_value_int32(env, args[0], &dtUs) != napi_ok ||
      napi_get_value_int32(env, args[1], &srHz) != napi_ok)
    return Throw(env, "ERR_LC3_ARGS", "expected (frameDurationUs, sampleRateHz)");
  int samples = lc3_frame_samples(dtUs, srHz);
  if (samples <= 0) return Throw(env, "ERR_LC3_ARGS", "unsupported LC3 frame duration or sample rate");
  unsigned size = encoder ? lc3_encoder_size(dtUs, srHz) : lc3_decoder_size(dtUs, srHz);
  // liblc3 wants memory aligned to a pointer; malloc gives max_align_t.
  void* mem = std::malloc(size);
  if (mem == nullptr) return Throw(env, "ERR_LC3_NOMEM", "out of memory");
  Codec* c = new Codec();
  c->mem = mem;
  c->dtUs = dtUs;
  c->srHz = srHz;
  c->frameSamples = samples;
  if (encoder) c->enc = lc3_setup_encoder(dtUs, srHz, 0, mem);
  else c->dec = lc3_setup_decoder(dtUs, srHz, 0, mem);
  if ((encoder && c->enc == nullptr) || (!encoder && c->dec == nullptr)) {
    std::free(mem);
    delete c;
    return Throw(env, "ERR_LC3_ARGS", "liblc3 setup failed");
  }
  CHECK(env, napi_wrap(env, self, c, Finalize, nullptr, nullptr));
  return self;
}

napi_value NewDecoder(napi_env env, napi_callback_info info) { return Construct(env, info, false); }
napi_value NewEncoder(napi_env env, napi_callback_info info) { return Construct(env, info, true); }

// Returns a pointer and length for a TypedArray / Buffer argument; false if it is none.
bool BytesOf(napi_env env, napi_value v, uint8_t** data, size_t* len) {
  bool is = false;
  if (napi_is_typedarray(env, v, &is) != napi_ok || !is) return false;
  napi_typedarray_type type;
  size_t length;
  void* ptr;
  napi_value ab;
  size_t offset;
  if (napi_get_typedarray_info(env, v, &type, &length, &ptr, &ab, &offset) != napi_ok) return false;
  size_t elem = 1;
  switch (type) {
    case napi_int16_array: case napi_uint16_array: elem = 2; break;
    case napi_int32_array: case napi_uint32_array: case napi_float32_array: elem = 4; break;
    case napi_float64_array: case napi_bigint64_array: case napi_biguint64_array: elem = 8; break;
    default: elem = 1;
  }
  *data = static_cast<uint8_t*>(ptr);
  *len = length * elem;
  return true;
}

// decodeInto(frame: Uint8Array | null, out: Int16Array, offsetSamples: number): 0 decoded, 1 concealed (PLC).
// Writing into a caller-owned buffer lets a batch of frames decode without one allocation per frame.
napi_value DecodeInto(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value args[3];
  napi_value self;
  CHECK(env, napi_get_cb_info(env, info, &argc, args, &self, nullptr));
  Codec* c;
  CHECK(env, napi_unwrap(env, self, reinterpret_cast<void**>(&c)));
  if (c->dec == nullptr) return Throw(env, "ERR_LC3_ARGS", c->mem == nullptr ? "decoder used after free()" : "not a decoder");
  if (argc < 3) return Throw(env, "ERR_LC3_ARGS", "expected (frame, out, offset)");
  uint8_t* in = nullptr;
  size_t inLen = 0;
  napi_valuetype t;
  CHECK(env, napi_typeof(env, args[0], &t));
  if (t != napi_null && t != napi_undefined && !BytesOf(env, args[0], &in, &inLen))
    return Throw(env, "ERR_LC3_ARGS", "frame must be a Uint8Array or null");
  if (inLen == 0) in = nullptr;  // empty frame = lost frame
  if (in != nullptr && (inLen < LC3_MIN_FRAME_BYTES || inLen > LC3_MAX_FRAME_BYTES))
    return Throw(env, "ERR_LC3_FRAME_SIZE", "LC3 frame must be 20..400 bytes");
  uint8_t* outBytes;
  size_t outLen;
  if (!BytesOf(env, args[1], &outBytes, &outLen)) return Throw(env, "ERR_LC3_ARGS", "out must be an Int16Array");
  int64_t offset = 0;
  CHECK(env, napi_get_value_int64(env, args[2], &offset));
  if (offset < 0 || static_cast<size_t>(offset + c->frameSamples) * 2 > outLen)
    return Throw(env, "ERR_LC3_ARGS", "out is too small for one frame at offset");
  int16_t* pcm = reinterpret_cast<int16_t*>(outBytes) + offset;
  int rc = lc3_decode(c->dec, in, static_cast<int>(inLen), LC3_PCM_FORMAT_S16, pcm, 1);
  if (rc < 0) return Throw(env, "ERR_LC3_ARGS", "lc3_decode rejected its parameters");
  napi_value result;
  CHECK(env, napi_create_int32(env, rc, &result));
  return result;
}

// encodeInto(pcm: Int16Array (one frame), out: Uint8Array (frame bytes, 20..400)): writes out.
napi_value EncodeInto(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value args[2];
  napi_value self;
  CHECK(env, napi_get_cb_info(env, info, &argc, args, &self, nullptr));
  Codec* c;
  CHECK(env, napi_unwrap(env, self, reinterpret_cast<void**>(&c)));
  if (c->enc == nullptr) return Throw(env, "ERR_LC3_ARGS", c->mem == nullptr ? "encoder used after free()" : "not an encoder");
  uint8_t *pcm, *out;
  size_t pcmLen, outLen;
  if (argc < 2 || !BytesOf(env, args[0], &pcm, &pcmLen) || !BytesOf(env, args[1], &out, &outLen))
    return Throw(env, "ERR_LC3_ARGS", "expected (pcm: Int16Array, out: Uint8Array)");
  if (pcmLen < static_cast<size_t>(c->frameSamples) * 2) return Throw(env, "ERR_LC3_ARGS", "pcm shorter than one frame");
  if (outLen < LC3_MIN_FRAME_BYTES || outLen > LC3_MAX_FRAME_BYTES)
    return Throw(env, "ERR_LC3_FRAME_SIZE", "LC3 frame must be 20..400 bytes");
  if (lc3_encode(c->enc, LC3_PCM_FORMAT_S16, pcm, 1, static_cast<int>(outLen), out) < 0)
    return Throw(env, "ERR_LC3_ARGS", "lc3_encode rejected its parameters");
  return nullptr;
}

// free(): releases the codec memory now rather than at the wrapper's finalizer (a codec thread's GC runs seldom);
// later calls throw. Idempotent.
napi_value Free(napi_env env, napi_callback_info info) {
  napi_value self;
  CHECK(env, napi_get_cb_info(env, info, nullptr, nullptr, &self, nullptr));
  Codec* c;
  CHECK(env, napi_unwrap(env, self, reinterpret_cast<void**>(&c)));
  std::free(c->mem);
  c->mem = nullptr;
  c->dec = nullptr;
  c->enc = nullptr;
  return nullptr;
}

napi_value FrameSamples(napi_env env, napi_callback_info info) {
  napi_value self;
  CHECK(env, napi_get_cb_info(env, info, nullptr, nullptr, &self, nullptr));
  Codec* c;
  CHECK(env, napi_unwrap(env, self, reinterpret_cast<void**>(&c)));
  napi_value v;
  CHECK(env, napi_create_int32(env, c->frameSamples, &v));
  return v;
}

napi_value DefineClass(napi_env env, const char* name, napi_callback ctor, napi_callback method, const char* methodName) {
  napi_property_descriptor props[] = {
      {methodName, nullptr, method, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"frameSamples", nullptr, nullptr, FrameSamples, nullptr, nullptr, napi_default, nullptr},
      {"free", nullptr, Free, nullptr, nullptr, nullptr, napi_default, nullptr},
  };
  napi_value cls;
  CHECK(env, napi_define_class(env, name, NAPI_AUTO_LENGTH, ctor, nullptr, 3, props, &cls));
  return cls;
}

napi_value Init(napi_env env, napi_value exports) {
  napi_value dec = DefineClass(env, "Lc3Decoder", NewDecoder, DecodeInto, "decodeInto");
  napi_value enc = DefineClass(env, "Lc3Encoder", NewEncoder, EncodeInto, "encodeInto");
  if (dec == nullptr || enc == nullptr) return nullptr;
  CHECK(env, napi_set_named_property(env, exports, "Lc3Decoder", dec));
  CHECK(env, napi_set_named_property(env, exports, "Lc3Encoder", enc));
  return exports;
}

}  // namespace

NAPI_MODULE(NODE_GYP_MODULE_NAME, Init)
