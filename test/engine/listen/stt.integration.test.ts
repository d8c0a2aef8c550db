// STT engine selection and failure, two-channel sessions, and conversation events across nodes.
import t from 'tap';
import { startService } from '../../helpers/service.js';
import { bearer } from '../../helpers/http.js';
import { advance, open } from '../../helpers/listen.js';
import { until } from '../../helpers/until.js';
import { RecordingSttEngine } from '../../fakes/recording-stt.js';
import { sine } from '../../helpers/codec-fixtures.js';

t.test('stt_failed then 1011: no engine for the language, engine cannot start, engine lost mid-session', async (t) => {
  const english = new RecordingSttEngine('english', ['en']);
  const ts = await startService(t, { sttEngines: [english] });
  const a = await open(ts, { uid: 'u1', language: 'ja' });
  const failed = await a.json((m) => m.status === 'stt_failed');
  t.match(failed, { type: 'service_status', outcome: 'config_error', retryable: false, reason: 'language_not_supported' });
  t.same(await a.closed, { code: 1011, reason: 'transcription_service_unavailable' });

  english.failOpen = true;
  const b = await open(ts, { uid: 'u1' });
  // Three attempts with backoff (1–2 s, then 2–3 s) before giving up.
  await until(() => english.attempts === 1, { what: 'first attempt' });
  await advance(ts, 2000);
  await until(() => english.attempts === 2, { what: 'second attempt' });
  await advance(ts, 3000);
  t.match(await b.json((m) => m.status === 'stt_failed'), { outcome: 'upstream_error', retryable: true, reason: 'initialization_failed', provider: 'english' });
  t.equal((await b.closed).code, 1011);

  english.failOpen = false;
  const c = await open(ts, { uid: 'u1' });
  await c.ready();
  english.streams.at(-1)!.fail({ outcome: 'upstream_error', retryable: true, reason: 'connection_lost' });
  t.match(await c.json((m) => m.status === 'stt_failed'), { reason: 'connection_lost', provider: 'english' });
  t.equal((await c.closed).code, 1011);
  await until(() => ts.service.sessions.size === 0, { what: 'sessions gone' });
});

t.test('stt_service picks a configured engine by name', async (t) => {
  const first = new RecordingSttEngine('provider_a');
  const second = new RecordingSttEngine('provider_b');
  const ts = await startService(t, { sttEngines: [first, second] });
  const c = await open(ts, { uid: 'u1', stt_service: 'provider_b' });
  await c.ready();
  t.equal(second.streams.length, 1);
  t.equal(first.streams.length, 0);
  c.close();
  await c.closed;
});

t.test('two channels: one STT stream per channel; channel 1 is the wearer', async (t) => {
  const engine = new RecordingSttEngine();
  const ts = await startService(t, { sttEngines: [engine] });
  const c = await open(ts, { uid: 'u1', codec: 'pcm16', sample_rate: '16000', channels: '2' });
  await c.ready();
  t.equal(engine.streams.length, 2);
  const pcm = sine(300, 16000, 0.1, 4000);
  for (const id of [1, 2]) {
    const m = new Uint8Array(1 + pcm.byteLength);
    m[0] = id;
    m.set(new Uint8Array(pcm.buffer), 1);
    c.ws.send(m);
  }
  await until(() => engine.streams.every((s) => s.samples >= 1600), { what: 'both channels decoded' });
  engine.streams[0]!.emit([{ text: 'Mine.', speaker: 'SPEAKER_00', start: 0, end: 0.5 }]);
  engine.streams[1]!.emit([{ text: 'Theirs.', speaker: 'SPEAKER_00', start: 0.6, end: 1 }]);
  await advance(ts, 600);
  const segs = await c.json((m) => Array.isArray(m));
  t.match(segs, [{ text: 'Mine.', speaker: 'SPEAKER_00', is_user: true }, { text: 'Theirs.', speaker: 'SPEAKER_01', speaker_id: 1, is_user: false }]);
  c.close();
  await c.closed;
});

t.test('a jobs node processes; the listen node hears memory_created over Redis', async (t) => {
  const listenNode = await startService(t, { env: { ROLE: 'listen' } });
  const jobsNode = await startService(t, { sameDeploymentAs: listenNode, env: { ROLE: 'jobs' } });
  t.equal(jobsNode.service.sessions.size, 0);
  const c = await open(listenNode, { uid: 'u1', custom_stt: 'enabled' });
  await c.ready();
  const actor = listenNode.service.sessions.sessionsOf('u1')[0]!;
  c.ws.send(JSON.stringify({ type: 'suggested_transcript', stt_provider: 'app', segments: [{ text: 'Plan the trip to Lisbon next month.', speaker: 'SPEAKER_00', start: 0, end: 2 }] }));
  await until(() => actor.stats.textMessages === 1, { what: 'message received' });
  await advance(listenNode, 600);
  await c.json((m) => Array.isArray(m));
  const id = actor.conversationId!;
  const res = await jobsNode.req('/v1/conversations', { method: 'POST', headers: bearer(await listenNode.token('u1')), body: {} });
  t.equal(res.status, 200, 'ended through the other node');
  t.equal((await c.json((m) => m.type === 'memory_processing_started')).memory.id, id);
  const created = await c.json((m) => m.type === 'memory_created', 20_000);
  t.equal(created.memory.id, id);
  t.equal(created.memory.status, 'completed');
  c.close();
  await c.closed;
});
