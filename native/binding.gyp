{
  "variables": {
    "have_libavcodec": "<!(test -f deps/ffmpeg/lib/libavcodec.a && echo 1 || echo 0)"
  },
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
      "target_name": "dsp",
      "sources": ["dsp.cc"],
      "cflags_cc": ["-O3", "-ffast-math", "-fno-exceptions"],
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
  ],
  "conditions": [
    ["have_libavcodec==1", {
      "targets": [
        {
          "target_name": "aac",
          "sources": ["aac.cc"],
          "include_dirs": ["deps/ffmpeg/include"],
          "libraries": ["<(module_root_dir)/deps/ffmpeg/lib/libavcodec.a", "<(module_root_dir)/deps/ffmpeg/lib/libavutil.a", "-lm", "-Wl,-Bsymbolic", "-Wl,--exclude-libs,ALL"],
          "cflags_cc": ["-O2", "-fno-exceptions"],
          "defines": ["NAPI_VERSION=8"]
        }
      ]
    }]
  ]
}
