{
  "targets": [
    {
      "target_name": "lc3",
      "sources": ["lc3.cc"],
      "libraries": ["-llc3"],
      "cflags_cc": ["-O2", "-fno-exceptions"],
      "defines": ["NAPI_VERSION=8"]
    },
    {
      "target_name": "opus",
      "sources": ["opus.cc"],
      "include_dirs": ["<!@(pkg-config --cflags-only-I opus | sed 's/-I//g')"],
      "libraries": ["<!@(pkg-config --libs opus)"],
      "cflags_cc": ["-O2", "-fno-exceptions"],
      "defines": ["NAPI_VERSION=8"]
    },
    {
      "target_name": "memory",
      "sources": ["memory.cc"],
      "cflags_cc": ["-O2", "-fno-exceptions"],
      "defines": ["NAPI_VERSION=8"]
    },
    {
      "target_name": "pocketsphinx",
      "sources": ["pocketsphinx.cc"],
      "include_dirs": ["<!@(pkg-config --cflags-only-I pocketsphinx sphinxbase | sed 's/-I//g')"],
      "libraries": ["<!@(pkg-config --libs pocketsphinx sphinxbase)"],
      "cflags_cc": ["-O2", "-fno-exceptions"],
      "defines": ["NAPI_VERSION=8"]
    }
  ]
}
