// A client that sends audio faster than real time. The node does not pace it: a node that keeps up decodes it all and
// hands it to the provider as fast as it comes; what waits undecoded is bounded by LISTEN_MAX_INBOUND_BYTES, past
// which the session closes 1013 "audio arrives faster than it can be decoded" (what it accepted is still transcribed).
import t from 'tap';
import { startService } from '../../helpers/service.js';
import { advance, open } from '../../helpers/listen.js';
import { until } from '../../helpers/until.js';
import { RecordingSttEngine } from '../../fakes/recording-stt.js';
import { frames, sine } from '../../helpers/codec-fixtures.js';
import { OpusEncoderStream } from '../../../native/opus.js';
import { NullSttEngine } from '../../../engine/stt/null.js';

t.test('a minute of Opus sent in one burst: every sample reaches the engine, the session goes on', async (t) => {
  const engine = new RecordingSttEngine();
  const ts = await startService(t, { sttEngines: [engine], env: { VAD_GATE: 'off' } });
  const c = await open(ts, { uid: 'u1', codec: 'opus', sample_rate: '16000' });
  await c.ready();
  const actor = ts.service.sessions.sessionsOf('u1')[0]!;
  const enc = new OpusEncoderStream(16000);
  // A minute of Opus is a fraction of the 1 MiB inbound bound, so however slow the node it is never refused.
  const packets = frames(sine(440, 16000, 60, 8000), 320).map((f) => enc.encode(f));
  const bytes = packets.reduce((n, p) => n + p.length, 0);
  t.ok(bytes < 1024 * 1024, `${bytes} bytes of Opus`);
  for (const p of packets) c.ws.send(p);
  const stream = engine.streams[0]!;
  await until(() => stream.samples >= 60 * 16000, { what: 'the minute at the engine', timeoutMs: 60_000 });
  t.equal(stream.samples, 60 * 16000, 'every sample, once');
  t.equal(actor.stats.audioMessages, packets.length, 'every frame taken');
  stream.emit([{ text: 'Sent in a hurry.', speaker: 'SPEAKER_00', start: 0.2, end: 1 }]);
  await advance(ts, 600);
  t.match(await c.json((m) => Array.isArray(m)), [{ text: 'Sent in a hurry.' }]);
  t.equal(c.ws.readyState, c.ws.OPEN, 'the session is open');
  c.close();
  await c.closed;
});

// Every decode task of the fixture keeps its thread busy 60 ms: audio sent in a burst waits undecoded.
process.env.SLOW_DECODE_MS = '60';

t.test('a burst the node cannot decode in time is refused past the bound with 1013; the node goes on', async (t) => {
  const ts = await startService(t, {
    env: { LISTEN_MAX_INBOUND_BYTES: String(64 * 1024), CODEC_THREADS: '1', VAD_GATE: 'off' },
    tuning: { inlineBusyPct: 0 },
    sttEngines: [new NullSttEngine()],
    codecWorker: new URL('../../helpers/slow-decode-worker.js', import.meta.url).href,
  });
  const c = await open(ts, { uid: 'u1', codec: 'pcm16', sample_rate: '16000' });
  await c.ready();
  const actor = ts.service.sessions.sessionsOf('u1')[0]!;
  c.ws.on('error', () => undefined);
  // 20 s of pcm16 (640 KB) at once: ten times the bound.
  const frame = Buffer.alloc(3200, 1);
  for (let i = 0; i < 200 && c.ws.readyState === c.ws.OPEN; i++) c.ws.send(frame);
  t.same(await c.closed, { code: 1013, reason: 'audio arrives faster than it can be decoded' });
  t.ok(actor.stats.audioBytes <= 64 * 1024 + actor.stats.pcmSamples * 2, `taken ${actor.stats.audioBytes} bytes, decoded ${actor.stats.pcmSamples * 2}: no more than the bound waited`);
  await until(() => ts.service.sessions.sessionsOf('u1').length === 0, { what: 'the session ended', timeoutMs: 30_000 });
  t.equal((await ts.req('/health')).status, 200, 'the node is up');
});
