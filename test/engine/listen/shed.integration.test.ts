// A node whose live audio waits on decoding refuses new sessions (1013) and keeps the ones it has; once decoding has
// nothing left waiting it takes sessions again (LISTEN_SHED_DECODE_DELAY_MS, engine/codec/overload.ts).
import t from 'tap';
import { NullSttEngine } from '../../../engine/stt/null.js';
import { startService } from '../../helpers/service.js';
import { advance, connect, open } from '../../helpers/listen.js';
import { until } from '../../helpers/until.js';

// Every decode task of the fixture keeps its thread busy 60 ms: each one's audio waits at least that long.
process.env.SLOW_DECODE_MS = '60';

t.test('refused with 1013 while decoding lags, the live session kept; taken again once it stopped', async (t) => {
  const ts = await startService(t, {
    env: { LISTEN_SHED_DECODE_DELAY_MS: '40', CODEC_THREADS: '1', VAD_GATE: 'off' },
    tuning: { inlineBusyPct: 0 },
    sttEngines: [new NullSttEngine()],
    codecWorker: new URL('../../helpers/slow-decode-worker.js', import.meta.url).href,
  });
  const metric = async () => Number(/^listen_sessions_shed_total (\d+)/m.exec((await ts.req('/metrics')).text)?.[1]);
  // Decode tasks of every codec shard.
  const tasks = async () => [...(await ts.req('/metrics')).text.matchAll(/^listen_decode_delay_seconds_count\{shard="[^"]+"\} (\d+)$/gm)].reduce((n, m) => n + Number(m[1]), 0);

  const live = await open(ts, { uid: 'u1', codec: 'pcm16', sample_rate: '16000' });
  await live.ready();
  const beforeLag = await connect(ts, { uid: 'u2', codec: 'pcm16', sample_rate: '16000' });
  t.ok(beforeLag.client, 'a node keeping up takes a second session');
  await beforeLag.client!.ready();
  beforeLag.client!.close();
  t.equal(await metric(), 0);

  // One 20 ms frame at a time, the next once the last is decoded: each is a decode task of its own, and each task's
  // audio waits out its 60 ms of decoding, over the 40 ms threshold.
  const [actor] = ts.service.sessions.sessionsOf('u1');
  const frame = Buffer.alloc(640, 1);
  for (let i = 0; i < 25; i++) {
    const decoded = actor!.stats.pcmSamples;
    live.ws.send(frame);
    await until(() => actor!.stats.pcmSamples > decoded, { what: `frame ${i} decoded` });
  }
  t.ok((await tasks()) >= 25, 'a run of slow decode tasks');
  const refused = await open(ts, { uid: 'u3', codec: 'pcm16', sample_rate: '16000' });
  t.same(await refused.closed, { code: 1013, reason: 'server busy, try again later' }, 'a new session is refused with 1013');
  t.equal(await metric(), 1, 'and counted in listen_sessions_shed_total');
  t.equal(live.ws.readyState, live.ws.OPEN, 'the live session is still open');

  // Decoding has caught up: no task comes for a while of the service's clock (a second, or twice the last task's
  // delay: 5 s leaves room for a slow machine), and the node takes sessions again.
  t.equal(actor!.stats.pcmSamples * 2, actor!.stats.audioBytes, 'every frame decoded');
  await advance(ts, 5000);
  const after = await open(ts, { uid: 'u4', codec: 'pcm16', sample_rate: '16000' });
  await after.ready();
  t.pass('taken again once decoding has caught up');
  after.close();
  live.close();
  await live.closed;
});
