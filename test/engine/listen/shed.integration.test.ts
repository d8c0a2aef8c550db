// A node whose live audio waits on decoding refuses new sessions (1013) and keeps the ones it has; once decoding has
// nothing left waiting it takes sessions again (LISTEN_SHED_DECODE_DELAY_MS, engine/codec/overload.ts).
import t from 'tap';
import { NullSttEngine } from '../../../engine/stt/null.js';
import { startService } from '../../helpers/service.js';
import { advance, connect, open, until } from '../../helpers/listen.js';

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
  const tasks = async () => Number(/^listen_decode_delay_seconds_count (\d+)/m.exec((await ts.req('/metrics')).text)?.[1] ?? 0);

  const live = await open(ts, { uid: 'u1', codec: 'pcm16', sample_rate: '16000' });
  await live.ready();
  const beforeLag = await connect(ts, { uid: 'u2', codec: 'pcm16', sample_rate: '16000' });
  t.ok(beforeLag.client, 'a node keeping up takes a second session');
  await beforeLag.client!.ready();
  beforeLag.client!.close();
  t.equal(await metric(), 0);

  // 20 ms frames, one every 5 ms: each 60 ms decode task finds more waiting, so every task is over 40 ms.
  const frame = Buffer.alloc(640, 1);
  let sending = true;
  const pump = (async () => {
    while (sending) {
      live.ws.send(frame);
      await new Promise((r) => setTimeout(r, 5));
    }
  })();
  await until(async () => (await tasks()) >= 25, 20_000, 'a run of slow decode tasks');
  const refused = await open(ts, { uid: 'u3', codec: 'pcm16', sample_rate: '16000' });
  t.same(await refused.closed, { code: 1013, reason: 'server busy, try again later' }, 'a new session is refused with 1013');
  t.equal(await metric(), 1, 'and counted in listen_sessions_shed_total');
  sending = false;
  await pump;
  t.equal(live.ws.readyState, live.ws.OPEN, 'the live session is still open');

  // Decoding catches up: no task comes for a while of the service's clock (a second, or twice the last task's delay:
  // 5 s leaves room for a slow machine), and the node takes sessions again.
  const [actor] = ts.service.sessions.sessionsOf('u1');
  await until(() => actor!.stats.pcmSamples * 2 === actor!.stats.audioBytes, 10_000, 'every frame decoded');
  await advance(ts, 5000);
  const after = await open(ts, { uid: 'u4', codec: 'pcm16', sample_rate: '16000' });
  await after.ready();
  t.pass('taken again once decoding has caught up');
  after.close();
  live.close();
  await live.closed;
});
