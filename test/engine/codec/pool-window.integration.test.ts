// A session's window of PCM in its codec shard: nothing kept until asked, then the last seconds by stream position,
// on a thread and on the main thread alike; an Opus stream's kept as packets and decoded for each clip.
import t from 'tap';
import { CodecPool } from '../../../engine/codec/pool.js';
import { concat, pcmMessages, sine } from '../../helpers/codec-fixtures.js';
import { until } from '../../helpers/until.js';
import { OpusEncoderStream } from '../../../native/opus.js';

for (const inline of [false, true]) {
  t.test(`${inline ? 'main thread' : 'shard thread'}: clips come from the window only once it is on`, async (t) => {
    const pool = new CodecPool({ threads: 1, ...(inline ? { inline: () => true } : {}) });
    t.teardown(() => pool.close());
    const pcm = sine(440, 16000, 6, 8000);
    const messages = pcmMessages(pcm, 1600);
    const stream = pool.open({ sessionId: 's', codec: 'pcm16', sampleRate: 16000, channels: 1 });
    const push = async (from: number, to: number): Promise<void> => {
      let samples = 0;
      const target = (to - from) * 1600;
      const done = new Promise<void>((resolve) =>
        stream.on('pcm', (p) => {
          samples += p[0]!.length;
          if (samples >= target) resolve();
        }),
      );
      for (let i = from; i < to; i++) stream.push(messages[i]!);
      await done;
      stream.removeAllListeners('pcm');
    };
    await push(0, 20); // 2 s before the window
    t.equal((await stream.clip([0, 2])).length, 0, 'no window: nothing is kept');
    await stream.window(3);
    await push(20, 60); // 4 s more: the window keeps the last 3
    const clip = await stream.clip([1, 2.5, 3, 6, 9, 10]);
    t.same([...clip], [...pcm.subarray(3 * 16000, 6 * 16000)], 'the last 3 s, by stream position; older and later ranges left out');
    await stream.window(0);
    t.equal((await stream.clip([3, 6])).length, 0, 'a window let go holds nothing');
    await stream.close();
    t.equal((await stream.clip([3, 6])).length, 0, 'nor a closed stream');
  });
}

for (const inline of [false, true]) {
  t.test(`${inline ? 'main thread' : 'shard thread'}: an Opus stream's window keeps packets and decodes clips to the PCM the stream gave`, async (t) => {
    const pool = new CodecPool({ threads: 1, ...(inline ? { inline: () => true } : {}) });
    t.teardown(() => pool.close());
    const enc = new OpusEncoderStream(16000);
    const pcm = concat([sine(440, 16000, 3, 6000), sine(660, 16000, 3, 6000)]);
    const packets: Uint8Array[] = [];
    for (let at = 0; at + 320 <= pcm.length; at += 320) packets.push(new Uint8Array(enc.encode(pcm.subarray(at, at + 320))));
    const stream = pool.open({ sessionId: 'o', codec: 'opus_fs320', sampleRate: 16000, channels: 1 });
    const given: Int16Array[] = [];
    stream.on('pcm', (p) => given.push(p[0]!.slice()));
    const push = async (from: number, to: number): Promise<void> => {
      const target = to * 320;
      for (let i = from; i < to; i++) stream.push(packets[i]!);
      await until(() => given.reduce((n, p) => n + p.length, 0) >= target, { what: 'the packets decoded' });
    };
    await push(0, 50); // 1 s before the window
    await stream.window(3);
    await push(50, 300); // 5 s more: the window keeps the last 3
    const decoded = concat(given);
    const clip = await stream.clip([1, 2, 4.5, 5.5]);
    t.same([...clip], [...decoded.subarray(4.5 * 16000, 5.5 * 16000)], 'sample for sample what the stream decoded; older ranges left out');
    await stream.close();
  });
}
