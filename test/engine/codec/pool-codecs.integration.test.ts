// Every codec through the shards: 16 kHz mono out, duration kept, and batching never changes the samples.
import t from 'tap';
import { CodecPool, type Codec } from '../../../engine/codec/pool.js';
import { Lc3Encoder } from '../../../native/index.js';
import { OpusEncoderStream } from '../../../native/opus.js';
import { aacAdts, drive, elc3, frames, pcmMessages, speech } from '../../helpers/codec-fixtures.js';
import { until } from '../../helpers/until.js';

const pool = new CodecPool({ threads: 2 });
t.teardown(() => pool.close());
const dir = t.testdir();

interface Case {
  codec: Codec;
  rate: number;
  /** Input samples (at `rate`) and the messages a device would send for them. */
  make: () => { samples: number; messages: Uint8Array[] };
}

function opusCase(codec: 'opus' | 'opus_fs320', rate: number): Case {
  return {
    codec,
    rate,
    make: () => {
      const pcm = speech(dir, rate);
      const enc = new OpusEncoderStream(rate);
      const n = codec === 'opus' ? rate / 100 : rate / 50;
      return { samples: pcm.length, messages: frames(pcm, n).map((f) => enc.encode(f)) };
    },
  };
}

const cases: Case[] = [
  { codec: 'pcm16', rate: 16000, make: () => { const p = speech(dir, 16000); return { samples: p.length, messages: pcmMessages(p, 160) }; } },
  { codec: 'pcm8', rate: 8000, make: () => { const p = speech(dir, 8000); return { samples: p.length, messages: pcmMessages(p, 80) }; } },
  opusCase('opus', 16000),
  opusCase('opus_fs320', 16000),
  opusCase('opus', 48000),
  opusCase('opus_fs320', 24000),
  {
    // Three 30-byte frames per message, as pendants pack them into one BLE notification.
    codec: 'lc3_fs1030',
    rate: 16000,
    make: () => {
      const p = speech(dir, 16000);
      const { frames: f } = elc3(dir, p, 16000, 24000);
      const messages: Uint8Array[] = [];
      for (let i = 0; i < f.length; i += 3) {
        const group = f.slice(i, i + 3);
        const m = new Uint8Array(group.length * 30);
        group.forEach((g, k) => m.set(g, k * 30));
        messages.push(m);
      }
      return { samples: p.length, messages };
    },
  },
  {
    // Bare lc3: one frame per message, its size free (here it changes from frame to frame).
    codec: 'lc3',
    rate: 48000,
    make: () => {
      const p = speech(dir, 48000);
      const enc = new Lc3Encoder(10000, 48000);
      const sizes = [60, 80, 100, 120];
      return { samples: p.length, messages: frames(p, 480).map((f, i) => enc.encode(f, sizes[i % 4]!)) };
    },
  },
  { codec: 'aac', rate: 48000, make: () => { const p = speech(dir, 48000); return { samples: p.length, messages: aacAdts(dir, p, 48000) }; } },
  {
    // Two ADTS frames per message.
    codec: 'aac',
    rate: 44100,
    make: () => {
      const p = speech(dir, 44100);
      const f = aacAdts(dir, p, 44100);
      const messages: Uint8Array[] = [];
      for (let i = 0; i < f.length; i += 2) {
        const pair = f.slice(i, i + 2);
        const m = new Uint8Array(pair.reduce((n, x) => n + x.length, 0));
        let at = 0;
        for (const x of pair) {
          m.set(x, at);
          at += x.length;
        }
        messages.push(m);
      }
      return { samples: p.length, messages };
    },
  },
];

for (const c of cases) {
  t.test(`${c.codec} at ${c.rate} Hz: 16 kHz mono out, duration within 2%`, async (t) => {
    const { samples, messages } = c.make();
    const stream = pool.open({ sessionId: `${c.codec}-${c.rate}`, codec: c.codec, sampleRate: c.rate, channels: 1 });
    await stream.ready;
    const pcm = await drive(stream, messages, 7);
    t.equal(pcm.length, 1, 'one channel');
    const inSeconds = samples / c.rate;
    const outSeconds = pcm[0]!.length / 16000;
    t.ok(Math.abs(outSeconds - inSeconds) / inSeconds < 0.02, `in ${inSeconds.toFixed(3)} s, out ${outSeconds.toFixed(3)} s`);
    t.equal(stream.stats.corruptFrames, 0);
    // Speech, not silence.
    t.ok(pcm[0]!.some((v) => Math.abs(v) > 1000));
  });
}

for (const c of cases) {
  t.test(`${c.codec} at ${c.rate} Hz: small coalesced batches give the same samples as one pass`, async (t) => {
    const { messages } = c.make();
    const once = pool.open({ sessionId: `once-${c.codec}-${c.rate}`, codec: c.codec, sampleRate: c.rate, channels: 1 });
    const whole = await drive(once, messages);
    t.ok(once.stats.tasks <= 2, `one pass took ${once.stats.tasks} task(s)`);
    const small = pool.open({ sessionId: `small-${c.codec}-${c.rate}`, codec: c.codec, sampleRate: c.rate, channels: 1 });
    const pieces = await drive(small, messages, 3);
    t.ok(small.stats.tasks > messages.length / 6, `small batches took ${small.stats.tasks} tasks`);
    t.same(pieces, whole);
  });
}

/** Encodes `pcm` at `rate` as the codec's messages: opus_fs320 20 ms packets, lc3_fs1030 10 ms frames of 30 bytes. */
const sideBySideCodecs = {
  opus_fs320: { rates: [16000, 24000, 48000, 16000, 12000], encode: (pcm: Int16Array, rate: number) => { const enc = new OpusEncoderStream(rate); return frames(pcm, rate / 50).map((f) => enc.encode(f)); } },
  lc3_fs1030: { rates: [16000, 32000, 48000, 16000, 24000], encode: (pcm: Int16Array, rate: number) => { const enc = new Lc3Encoder(10000, rate); return frames(pcm, rate / 100).map((f) => enc.encode(f, 30)); } },
} as const;

for (const [codec, { rates, encode }] of Object.entries(sideBySideCodecs)) t.test(`${codec}: streams decoded side by side in one shard each get their own samples, task after task`, async (t) => {
  // The shard's tasks reuse their PCM memory (the decoders' scratch and the answer buffers moved back): a mix-up would
  // hand one stream another's samples or an earlier task's.
  const one = new CodecPool({ threads: 1, batchWindowMs: 0 });
  t.teardown(() => one.close());
  const inputs = rates.map((rate, i) => {
    const pcm = speech(dir, rate);
    // Each stream starts at a different place in the speech, so no two streams' samples agree.
    const start = Math.floor((pcm.length * i) / 7);
    return { rate, messages: encode(pcm.subarray(start), rate) };
  });
  const alone = await Promise.all(inputs.map(({ rate, messages }, i) => drive(pool.open({ sessionId: `alone-${codec}-${i}`, codec: codec as Codec, sampleRate: rate, channels: 1 }), messages)));
  const streams = inputs.map(({ rate }, i) => one.open({ sessionId: `side-${codec}-${i}`, codec: codec as Codec, sampleRate: rate, channels: 1 }));
  const out = streams.map(() => [] as Int16Array[]);
  streams.forEach((s, i) => s.on('pcm', (pcm) => out[i]!.push(pcm[0]!.slice())));
  await Promise.all(streams.map((s) => s.ready));
  const longest = Math.max(...inputs.map((x) => x.messages.length));
  for (let m = 0; m < longest; m++) {
    inputs.forEach(({ messages }, i) => messages[m] && streams[i]!.push(messages[m]!));
    // Every second message waits for the next task to leave, so the shard runs task after task however slow it is.
    if (m % 2 === 1) {
      const before = one.taskStats.tasks;
      await until(() => one.taskStats.tasks > before, { what: 'the next task', everyMs: 1 });
    }
  }
  await Promise.all(streams.map((s) => s.close({ flush: true })));
  t.ok(one.taskStats.tasks > 40, `${one.taskStats.tasks} tasks`);
  t.ok(one.taskStats.batches > one.taskStats.tasks * 1.5, 'tasks carried several streams at once');
  for (let i = 0; i < streams.length; i++) {
    const got = new Int16Array(out[i]!.reduce((n, c) => n + c.length, 0));
    out[i]!.reduce((at, c) => (got.set(c, at), at + c.length), 0);
    t.same(got, alone[i]![0], `stream ${i} (${rates[i]} Hz)`);
  }
});

t.test('pcm8 and pcm16: messages that split samples (odd byte counts) lose no byte, in one pass or in small batches', async (t) => {
  for (const [codec, rate] of [['pcm16', 16000], ['pcm8', 8000]] as const) {
    const p = speech(dir, rate);
    const bytes = new Uint8Array(p.buffer, p.byteOffset, p.byteLength);
    const sizes = [161, 1, 159, 3, 320, 77];
    const ragged: Uint8Array[] = [];
    for (let at = 0, i = 0; at < bytes.length; i++) {
      const n = sizes[i % sizes.length]!;
      ragged.push(bytes.slice(at, at + n));
      at += n;
    }
    t.ok(ragged.some((m) => m.length % 2 === 1), 'some messages end mid-sample');
    const open = (name: string) => pool.open({ sessionId: `${name}-${codec}`, codec, sampleRate: rate, channels: 1 });
    const reference = await drive(open('even'), pcmMessages(p, rate / 100));
    if (codec === 'pcm16') t.same(reference, [p], 'pcm16 at 16 kHz is passed through as sent');
    t.same(await drive(open('ragged-once'), ragged), reference, `${codec}: one pass`);
    t.same(await drive(open('ragged-small'), ragged, 3), reference, `${codec}: batches of 3 messages`);
  }
});
