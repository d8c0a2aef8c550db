// N-API addon: the multiply-adds of the polyphase resampler (workers/resample.ts keeps the filter, history and position),
// native because V8 does not vectorise the reduction; the compiler does (SSE2, or AVX2+FMA chosen at load).
#define NAPI_UTIL_ERROR "ERR_DSP_NAPI"
#include "napi-util.h"
#include <cmath>
#include <cstdint>

namespace {

using napi_util::TypedArrayOf;
const auto Throw = napi_util::ThrowRange;

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define DSP_CLONES __attribute__((target_clones("arch=haswell", "default")))
#else
#define DSP_CLONES
#endif

// Writes outputs while the filter's reach (pos + half) stays inside the history; answers how many.
DSP_CLONES
int Run(const float* coeffs, int taps, int up, int down, const float* hist, int avail, int* pos, int* phase, int16_t* out,
        int outLen) {
  const int half = taps / 2;
  const int stepInt = down / up;
  const int stepFrac = down % up;
  int p = *pos;
  int ph = *phase;
  int n = 0;
  while (p + half < avail && n < outLen) {
    const float* c = coeffs + static_cast<ptrdiff_t>(ph) * taps;
    const float* x = hist + (p - half + 1);
    float acc = 0.0f;
    for (int k = 0; k < taps; k++) acc += c[k] * x[k];
    const float v = std::nearbyint(acc);
    out[n++] = static_cast<int16_t>(v > 32767.0f ? 32767 : v < -32768.0f ? -32768 : static_cast<int>(v));
    p += stepInt;
    ph += stepFrac;
    if (ph >= up) {
      ph -= up;
      p += 1;
    }
  }
  *pos = p;
  *phase = ph;
  return n;
}

// resampleRun(coeffs: Float32Array, taps, up, down, hist: Float32Array, avail, state: Int32Array [pos, phase],
// out: Int16Array): outputs written into `out` from 0; `state` moves on.
napi_value ResampleRun(napi_env env, napi_callback_info info) {
  size_t argc = 8;
  napi_value args[8];
  CHECK(env, napi_get_cb_info(env, info, &argc, args, nullptr, nullptr));
  if (argc < 8) return Throw(env, "ERR_DSP_ARGS", "expected (coeffs, taps, up, down, hist, avail, state, out)");
  void *coeffs, *hist, *state, *out;
  size_t coeffsLen, histLen, stateLen, outLen;
  int32_t taps, up, down, avail;
  if (!TypedArrayOf(env, args[0], napi_float32_array, &coeffs, &coeffsLen) ||
      !TypedArrayOf(env, args[4], napi_float32_array, &hist, &histLen) ||
      !TypedArrayOf(env, args[6], napi_int32_array, &state, &stateLen) ||
      !TypedArrayOf(env, args[7], napi_int16_array, &out, &outLen) || napi_get_value_int32(env, args[1], &taps) != napi_ok ||
      napi_get_value_int32(env, args[2], &up) != napi_ok || napi_get_value_int32(env, args[3], &down) != napi_ok ||
      napi_get_value_int32(env, args[5], &avail) != napi_ok)
    return Throw(env, "ERR_DSP_ARGS", "expected (Float32Array, int, int, int, Float32Array, int, Int32Array, Int16Array)");
  int32_t* st = static_cast<int32_t*>(state);
  // Every read stays inside the arrays: the filter reaches back half-1 samples and forward half, rows are `taps` long.
  if (taps <= 0 || (taps & 1) != 0 || up <= 0 || down <= 0 || coeffsLen < static_cast<size_t>(up) * taps || stateLen < 2 ||
      avail < 0 || static_cast<size_t>(avail) > histLen || st[1] < 0 || st[1] >= up || st[0] - taps / 2 + 1 < 0)
    return Throw(env, "ERR_DSP_ARGS", "resampler state out of range");
  int pos = st[0];
  int phase = st[1];
  int n = Run(static_cast<const float*>(coeffs), taps, up, down, static_cast<const float*>(hist), avail, &pos, &phase,
              static_cast<int16_t*>(out), static_cast<int>(outLen));
  st[0] = pos;
  st[1] = phase;
  napi_value result;
  CHECK(env, napi_create_int32(env, n, &result));
  return result;
}

napi_value Init(napi_env env, napi_value exports) {
  napi_value fn;
  CHECK(env, napi_create_function(env, "resampleRun", NAPI_AUTO_LENGTH, ResampleRun, nullptr, &fn));
  CHECK(env, napi_set_named_property(env, exports, "resampleRun", fn));
  return exports;
}

}  // namespace

NAPI_MODULE(NODE_GYP_MODULE_NAME, Init)
