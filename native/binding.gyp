{
  "targets": [
    {
      "target_name": "lc3",
      "sources": ["lc3.cc"],
      "libraries": ["-llc3"],
      "cflags_cc": ["-O2", "-fno-exceptions"],
      "defines": ["NAPI_VERSION=8"]
    }
  ]
}
