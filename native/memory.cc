// N-API addon: hands memory glibc's malloc keeps after free() back to the kernel (malloc_trim), since a live node's
// many short-lived buffers would otherwise hold RSS at its high-water mark; says where malloc's memory is (mallinfo2).
#include <node_api.h>
#include <v8.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace {

// Releases the free pages of every arena; false when nothing was released or not on glibc (musl).
napi_value Trim(napi_env env, napi_callback_info) {
  bool released = false;
#if defined(__GLIBC__)
  released = malloc_trim(0) == 1;
#endif
  napi_value v;
  if (napi_get_boolean(env, released, &v) != napi_ok) return nullptr;
  return v;
}

bool SetNumber(napi_env env, napi_value obj, const char* name, double value) {
  napi_value v;
  return napi_create_double(env, value, &v) == napi_ok && napi_set_named_property(env, obj, name, v) == napi_ok;
}

// In use, mmapped and free-but-kept bytes summed over every arena, so native memory in use can be told from what the
// arenas hold after free(); undefined when not on glibc 2.33 or later.
napi_value Stats(napi_env env, napi_callback_info) {
  napi_value result;
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
  struct mallinfo2 mi = mallinfo2();
  if (napi_create_object(env, &result) != napi_ok) return nullptr;
  // uordblks: allocated from the arenas; hblkhd: allocated as mmapped chunks (always in use); fordblks: free in the
  // arenas (kept, or returned to the kernel by trim but still counted as arena space).
  if (!SetNumber(env, result, "inUseBytes", static_cast<double>(mi.uordblks)) ||
      !SetNumber(env, result, "mmappedBytes", static_cast<double>(mi.hblkhd)) ||
      !SetNumber(env, result, "freeBytes", static_cast<double>(mi.fordblks)))
    return nullptr;
#else
  if (napi_get_undefined(env, &result) != napi_ok) return nullptr;
#endif
  return result;
}

// Tells the calling thread's V8 heap that memory is wanted back (moderate pressure): V8 starts incremental marking at
// once, with the flags of its memory reducer, so that full GC evacuates fragmented pages and returns the empty ones.
// The one call here that is not N-API (engine/runtime/heap-compaction.ts says why): the addon is built from source
// against the headers of the node that runs it.
napi_value Tidy(napi_env env, napi_callback_info) {
  v8::Isolate* isolate = v8::Isolate::GetCurrent();
  if (isolate != nullptr) isolate->MemoryPressureNotification(v8::MemoryPressureLevel::kModerate);
  napi_value v;
  if (napi_get_undefined(env, &v) != napi_ok) return nullptr;
  return v;
}

napi_value Init(napi_env env, napi_value exports) {
  napi_value fn;
  if (napi_create_function(env, "trim", NAPI_AUTO_LENGTH, Trim, nullptr, &fn) != napi_ok) return nullptr;
  if (napi_set_named_property(env, exports, "trim", fn) != napi_ok) return nullptr;
  if (napi_create_function(env, "stats", NAPI_AUTO_LENGTH, Stats, nullptr, &fn) != napi_ok) return nullptr;
  if (napi_set_named_property(env, exports, "stats", fn) != napi_ok) return nullptr;
  if (napi_create_function(env, "tidy", NAPI_AUTO_LENGTH, Tidy, nullptr, &fn) != napi_ok) return nullptr;
  if (napi_set_named_property(env, exports, "tidy", fn) != napi_ok) return nullptr;
  return exports;
}

}  // namespace

NAPI_MODULE(NODE_GYP_MODULE_NAME, Init)
