// N-API addon: hands memory that glibc's malloc keeps after free() back to the kernel (malloc_trim).
//
// Rationale: a live node frees many short-lived buffers on several threads (audio frames, decode answers, socket
// writes); glibc keeps the freed pages in its arenas, so the process's RSS stays at its high-water mark and reads as
// hundreds of KiB per session that nothing uses. malloc_trim(0) releases free pages of every arena (measured on the
// fleet bench: about 50 MiB of a 215 MiB service at 100 sessions). Not glibc (musl): trim() answers false.
// tune() fixes two mallopt settings a long-running service wants (see Tune below).
#include <node_api.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace {

napi_value Trim(napi_env env, napi_callback_info) {
  bool released = false;
#if defined(__GLIBC__)
  released = malloc_trim(0) == 1;
#endif
  napi_value v;
  if (napi_get_boolean(env, released, &v) != napi_ok) return nullptr;
  return v;
}

// tune(mmapThresholdBytes, arenaMax): a fixed mmap threshold (glibc otherwise raises it, up to 32 MiB, each time a
// mapped block is freed, after which big short-lived buffers land in the arenas and leave holes there) and a cap on
// arenas (glibc makes up to 8 per core, one per thread that meets contention; each keeps its own free pages). 0 leaves
// a setting alone. Answers whether glibc took both.
napi_value Tune(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  if (napi_get_cb_info(env, info, &argc, argv, nullptr, nullptr) != napi_ok || argc < 2) return nullptr;
  int32_t threshold = 0;
  int32_t arenas = 0;
  if (napi_get_value_int32(env, argv[0], &threshold) != napi_ok || napi_get_value_int32(env, argv[1], &arenas) != napi_ok) return nullptr;
  bool ok = false;
#if defined(__GLIBC__)
  ok = true;
  if (threshold > 0) ok = mallopt(M_MMAP_THRESHOLD, threshold) == 1 && ok;
  if (arenas > 0) ok = mallopt(M_ARENA_MAX, arenas) == 1 && ok;
#endif
  napi_value v;
  if (napi_get_boolean(env, ok, &v) != napi_ok) return nullptr;
  return v;
}

bool Export(napi_env env, napi_value exports, const char* name, napi_callback cb) {
  napi_value fn;
  return napi_create_function(env, name, NAPI_AUTO_LENGTH, cb, nullptr, &fn) == napi_ok && napi_set_named_property(env, exports, name, fn) == napi_ok;
}

napi_value Init(napi_env env, napi_value exports) {
  if (!Export(env, exports, "trim", Trim) || !Export(env, exports, "tune", Tune)) return nullptr;
  return exports;
}

}  // namespace

NAPI_MODULE(NODE_GYP_MODULE_NAME, Init)
