// The main thread's loop pacing (engine/runtime/loop-pacer.ts) under a burst of live audio: it starts, loses nothing,
// shows in /metrics and stops once the frames stop.
import t from 'tap';
import { startService } from '../../helpers/service.js';
import { advance, open } from '../../helpers/listen.js';
import { until } from '../../helpers/until.js';
import { RecordingSttEngine } from '../../fakes/recording-stt.js';
import { OpusEncoderStream } from '../../../native/opus.js';
import { frames, sine } from '../../helpers/codec-fixtures.js';

const metric = (text: string, name: string): number | undefined => {
  const m = new RegExp(`^${name} (\\S+)$`, 'm').exec(text);
  return m ? Number(m[1]) : undefined;
};

t.test('a burst of frames paces the loop; every frame still reaches the engine; pacing stops with the frames', async (t) => {
  const engine = new RecordingSttEngine();
  const ts = await startService(t, { sttEngines: [engine], tuning: { loopPaceMs: 50 } });
  const c = await open(ts, { uid: 'u1', codec: 'opus_fs320', sample_rate: '16000' });
  await c.ready();
  const actor = ts.service.sessions.sessionsOf('u1')[0]!;
  const before = (await ts.req('/metrics')).text;
  t.equal(metric(before, 'listen_loop_paced'), 0, 'not paced while idle');
  t.equal(metric(before, 'listen_loop_paced_seconds_total'), 0);

  const seconds = 30;
  const enc = new OpusEncoderStream(16000);
  const packets = frames(sine(440, 16000, seconds, 8000), 320).map((f) => enc.encode(f));
  await advance(ts, 50); // the pacer counts frames from here
  for (const p of packets) c.ws.send(p);
  await until(() => actor.stats.audioMessages === packets.length, { what: 'every packet in' });
  // 1,500 frames in far less than the 9.4 s that 8 frames per 50 ms would take: the scheduler's next look paces the loop.
  await advance(ts, 50);
  const stream = engine.streams[0]!;
  await until(() => stream.samples >= 16000 * seconds * 0.98, { timeoutMs: 20_000, what: 'decoded audio at the engine' });
  t.ok(Math.abs(stream.samples / 16000 - seconds) / seconds <= 0.02, `engine received ${(stream.samples / 16000).toFixed(2)} s of ${seconds} s`);

  let after = '';
  await until(async () => {
    after = (await ts.req('/metrics')).text;
    return metric(after, 'listen_loop_paced') === 0;
  }, { timeoutMs: 5000, what: 'pacing over once the frames stopped' });
  t.ok(metric(after, 'listen_loop_paced_seconds_total')! > 0, `the loop slept ${metric(after, 'listen_loop_paced_seconds_total')} s between polls`);
  c.close();
});

t.test('a pace of 0: no pacing and no pacing metrics', async (t) => {
  const ts = await startService(t, { tuning: { loopPaceMs: 0 } });
  const text = (await ts.req('/metrics')).text;
  t.equal(metric(text, 'listen_loop_paced'), undefined);
  t.equal(metric(text, 'listen_loop_paced_seconds_total'), undefined);
});
