// What every addon here needs from node_api.h: a checked call, a thrown error, and a typed-array argument.
// Define NAPI_UTIL_ERROR (the code of a failed N-API call, e.g. "ERR_OPUS_NAPI") before including.
#pragma once
#include <node_api.h>
#include <cstddef>

#ifndef NAPI_UTIL_ERROR
#error "define NAPI_UTIL_ERROR before including napi-util.h"
#endif

// Runs an N-API call; if it fails, throws NAPI_UTIL_ERROR naming the call and returns nullptr from the caller.
#define CHECK(env, call)                                   \
  do {                                                     \
    if ((call) != napi_ok) {                               \
      napi_throw_error((env), NAPI_UTIL_ERROR, #call);     \
      return nullptr;                                      \
    }                                                      \
  } while (0)

namespace napi_util {

inline napi_value ThrowRange(napi_env env, const char* code, const char* msg) {
  napi_throw_range_error(env, code, msg);
  return nullptr;
}

inline napi_value ThrowError(napi_env env, const char* code, const char* msg) {
  napi_throw_error(env, code, msg);
  return nullptr;
}

// True when `v` is a typed array of exactly `type`; then `data` and `length` (in elements) describe it.
inline bool TypedArrayOf(napi_env env, napi_value v, napi_typedarray_type type, void** data, size_t* length) {
  bool is = false;
  if (napi_is_typedarray(env, v, &is) != napi_ok || !is) return false;
  napi_typedarray_type actual;
  napi_value ab;
  size_t byteOffset;
  return napi_get_typedarray_info(env, v, &actual, length, data, &ab, &byteOffset) == napi_ok && actual == type;
}

// The native object wrapped in `this` of a call, with the call's arguments (up to *argc of them) in `args`; nullptr
// when `this` wraps none.
template <typename T>
T* Unwrapped(napi_env env, napi_callback_info info, size_t* argc, napi_value* args) {
  napi_value self;
  if (napi_get_cb_info(env, info, argc, args, &self, nullptr) != napi_ok) return nullptr;
  void* data = nullptr;
  if (napi_unwrap(env, self, &data) != napi_ok) return nullptr;
  return static_cast<T*>(data);
}

}  // namespace napi_util
