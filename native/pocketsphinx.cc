// N-API addon over Debian's libpocketsphinx (5prealpha, "0.8" API): one decoder object per session, words with frame times.
#define NAPI_UTIL_ERROR "ERR_PS_NAPI"
#include "napi-util.h"
#include <pocketsphinx.h>
#include <cstring>
#include <cstdint>
#include <string>

namespace {

struct Decoder {
  cmd_ln_t* config = nullptr;
  ps_decoder_t* ps = nullptr;
  bool inUtt = false;
};

void FreeDecoder(Decoder* d) {
  if (d->ps != nullptr) ps_free(d->ps);
  if (d->config != nullptr) cmd_ln_free_r(d->config);
  d->ps = nullptr;
  d->config = nullptr;
  d->inUtt = false;
}

void Finalize(napi_env, void* data, void*) {
  Decoder* d = static_cast<Decoder*>(data);
  FreeDecoder(d);
  delete d;
}

const auto Throw = napi_util::ThrowError;

bool StringArg(napi_env env, napi_value v, std::string* out) {
  size_t len = 0;
  if (napi_get_value_string_utf8(env, v, nullptr, 0, &len) != napi_ok) return false;
  out->resize(len + 1);
  if (napi_get_value_string_utf8(env, v, &(*out)[0], len + 1, &len) != napi_ok) return false;
  out->resize(len);
  return true;
}

const auto Self = napi_util::Unwrapped<Decoder>;

// new PsDecoder(hmmDir, lmPath, dictPath)
napi_value New(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value args[3];
  napi_value self;
  CHECK(env, napi_get_cb_info(env, info, &argc, args, &self, nullptr));
  std::string hmm, lm, dict;
  if (argc < 3 || !StringArg(env, args[0], &hmm) || !StringArg(env, args[1], &lm) || !StringArg(env, args[2], &dict))
    return Throw(env, "ERR_PS_ARGS", "expected (hmmDir, lmPath, dictPath)");
  Decoder* d = new Decoder();
  // remove_silence no: every 10 ms of input is one frame, so frame numbers map straight back to stream time.
  d->config = cmd_ln_init(nullptr, ps_args(), TRUE, "-hmm", hmm.c_str(), "-lm", lm.c_str(), "-dict", dict.c_str(),
                          "-logfn", "/dev/null", "-remove_silence", "no", "-samprate", "16000", nullptr);
  if (d->config != nullptr) d->ps = ps_init(d->config);
  if (d->ps == nullptr) {
    FreeDecoder(d);
    delete d;
    return Throw(env, "ERR_PS_INIT", "pocketsphinx could not load the model");
  }
  CHECK(env, napi_wrap(env, self, d, Finalize, nullptr, nullptr));
  return self;
}

// process(pcm: Int16Array): boolean in-speech (starts an utterance when none is open)
napi_value Process(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value args[1];
  Decoder* d = Self(env, info, &argc, args);
  if (d == nullptr || d->ps == nullptr) return Throw(env, "ERR_PS_FREED", "decoder is freed");
  void* ptr = nullptr;
  size_t length = 0;
  if (argc < 1 || !napi_util::TypedArrayOf(env, args[0], napi_int16_array, &ptr, &length)) return Throw(env, "ERR_PS_ARGS", "expected an Int16Array");
  if (!d->inUtt) {
    if (ps_start_utt(d->ps) < 0) return Throw(env, "ERR_PS_DECODE", "ps_start_utt failed");
    d->inUtt = true;
  }
  if (length > 0 && ps_process_raw(d->ps, static_cast<const int16*>(ptr), length, FALSE, FALSE) < 0)
    return Throw(env, "ERR_PS_DECODE", "ps_process_raw failed");
  napi_value out;
  CHECK(env, napi_get_boolean(env, ps_get_in_speech(d->ps) != 0, &out));
  return out;
}

// Fillers and markers pocketsphinx puts in the segmentation: <s>, </s>, <sil>, [NOISE], (NULL).
bool IsFiller(const char* w) {
  return w == nullptr || w[0] == '<' || w[0] == '[' || w[0] == '(' || w[0] == '+';
}

// endUtterance(): { text, words: [[word, startFrame, endFrame], ...] }, or null when no utterance was open.
napi_value EndUtterance(napi_env env, napi_callback_info info) {
  size_t argc = 0;
  Decoder* d = Self(env, info, &argc, nullptr);
  if (d == nullptr || d->ps == nullptr) return Throw(env, "ERR_PS_FREED", "decoder is freed");
  napi_value result;
  if (!d->inUtt) {
    CHECK(env, napi_get_null(env, &result));
    return result;
  }
  d->inUtt = false;
  if (ps_end_utt(d->ps) < 0) return Throw(env, "ERR_PS_DECODE", "ps_end_utt failed");
  int32 score = 0;
  const char* hyp = ps_get_hyp(d->ps, &score);
  CHECK(env, napi_create_object(env, &result));
  napi_value text;
  CHECK(env, napi_create_string_utf8(env, hyp == nullptr ? "" : hyp, NAPI_AUTO_LENGTH, &text));
  CHECK(env, napi_set_named_property(env, result, "text", text));
  napi_value words;
  CHECK(env, napi_create_array(env, &words));
  uint32_t n = 0;
  for (ps_seg_t* seg = hyp == nullptr ? nullptr : ps_seg_iter(d->ps); seg != nullptr; seg = ps_seg_next(seg)) {
    const char* w = ps_seg_word(seg);
    if (IsFiller(w)) continue;
    int sf = 0, ef = 0;
    ps_seg_frames(seg, &sf, &ef);
    // Alternate pronunciations come back as "word(2)": keep the word.
    std::string word(w);
    size_t paren = word.find('(');
    if (paren != std::string::npos && paren > 0) word.resize(paren);
    napi_value entry, v;
    CHECK(env, napi_create_array_with_length(env, 3, &entry));
    CHECK(env, napi_create_string_utf8(env, word.c_str(), word.size(), &v));
    CHECK(env, napi_set_element(env, entry, 0, v));
    CHECK(env, napi_create_int32(env, sf, &v));
    CHECK(env, napi_set_element(env, entry, 1, v));
    CHECK(env, napi_create_int32(env, ef, &v));
    CHECK(env, napi_set_element(env, entry, 2, v));
    CHECK(env, napi_set_element(env, words, n++, entry));
  }
  CHECK(env, napi_set_named_property(env, result, "words", words));
  return result;
}

// free(): releases the decoder and its model now rather than at garbage collection; idempotent.
napi_value Free(napi_env env, napi_callback_info info) {
  size_t argc = 0;
  Decoder* d = Self(env, info, &argc, nullptr);
  if (d != nullptr) FreeDecoder(d);
  return nullptr;
}

napi_value Init(napi_env env, napi_value exports) {
  napi_property_descriptor methods[] = {
      {"process", nullptr, Process, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"endUtterance", nullptr, EndUtterance, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"free", nullptr, Free, nullptr, nullptr, nullptr, napi_default, nullptr},
  };
  napi_value cls;
  CHECK(env, napi_define_class(env, "PsDecoder", NAPI_AUTO_LENGTH, New, nullptr, 3, methods, &cls));
  CHECK(env, napi_set_named_property(env, exports, "PsDecoder", cls));
  return exports;
}

}  // namespace

NAPI_MODULE(NODE_GYP_MODULE_NAME, Init)
