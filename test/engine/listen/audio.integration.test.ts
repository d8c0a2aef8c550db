// Live audio end to end: opus_fs320 frames over the socket reach the STT engine as 16 kHz PCM; engine segments reach the client and the store.
import t from 'tap';
import { startService } from '../../helpers/service.js';
import { bearer } from '../../helpers/http.js';
import { advance, open } from '../../helpers/listen.js';
import { until } from '../../helpers/until.js';
import { RecordingSttEngine } from '../../fakes/recording-stt.js';
import { OpusEncoderStream } from '../../../native/opus.js';
import { frames, sine } from '../../helpers/codec-fixtures.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

t.test('opus_fs320 audio reaches the engine; scripted segments reach the client as a bare array and are stored', async (t) => {
  const engine = new RecordingSttEngine();
  const ts = await startService(t, { sttEngines: [engine] });
  const c = await open(ts, { uid: 'u1', codec: 'opus_fs320', sample_rate: '16000', source: 'omi' });
  await c.ready();
  const actor = ts.service.sessions.sessionsOf('u1')[0]!;
  t.equal(actor.state, 'ready');

  const seconds = 3;
  const enc = new OpusEncoderStream(16000);
  const packets = frames(sine(440, 16000, seconds, 8000), 320).map((f) => enc.encode(f));
  for (const p of packets) c.ws.send(p);
  const stream = engine.streams[0]!;
  await until(() => stream.samples >= 16000 * seconds * 0.98, { what: 'decoded audio at the engine', timeoutMs: 20_000 });
  await until(() => actor.stats.audioMessages === packets.length, { what: 'every packet counted' });
  t.equal(actor.state, 'streaming', 'audio moved the session to STREAMING');
  const duration = stream.samples / 16000;
  t.ok(Math.abs(duration - seconds) / seconds <= 0.02, `engine received ${duration.toFixed(3)} s of ${seconds} s`);
  t.ok(stream.chunks.every((ch) => ch instanceof Int16Array), '16-bit PCM');

  stream.emit([
    { text: 'Hello there.', speaker: 'SPEAKER_00', start: 0.5, end: 1.2 },
    { text: 'General Kenobi.', speaker: 'SPEAKER_01', start: 1.5, end: 2.5 },
  ]);
  await advance(ts, 600);
  const segments = await c.json((m) => Array.isArray(m));
  t.equal(segments.length, 2, 'both segments');
  const [a, b] = segments;
  t.match(a, { text: 'Hello there.', speaker: 'SPEAKER_00', speaker_id: 0, is_user: false, person_id: null, start: 0.5, end: 1.2, speech_profile_processed: false, stt_provider: 'recording' });
  t.match(b, { text: 'General Kenobi.', speaker: 'SPEAKER_01', speaker_id: 1 });
  t.match(a.id, UUID, 'uuid id');
  t.same(Object.keys(a).sort(), ['end', 'id', 'is_user', 'person_id', 'speaker', 'speaker_id', 'speech_profile_processed', 'start', 'stt_provider', 'text']);

  const id = actor.conversationId!;
  t.ok(id, 'the first audio opened a conversation');
  const res = await ts.req(`/v1/dev/user/conversations/${id}?include_transcript=true`, { headers: bearer(await ts.token('u1')) });
  t.equal(res.status, 200);
  t.equal(res.json.source, 'omi', 'source from the query');
  t.same(res.json.transcript_segments.map((s: { text: string }) => s.text), ['Hello there.', 'General Kenobi.'], 'transcript persisted');

  // Graceful stop: the last segments are flushed before the socket closes with 1012.
  stream.emit([{ text: 'Goodbye.', speaker: 'SPEAKER_00', start: 2.6, end: 2.9 }]);
  const stopping = ts.service.stop();
  const last = await c.json((m) => Array.isArray(m));
  t.equal(last[0].text, 'Goodbye.', 'segments emitted before shutdown reach the client');
  t.same(await c.closed, { code: 1012, reason: 'service restart: reconnect' }, 'graceful stop closes with 1012');
  t.ok(stream.finalized, 'STT finalised before close');
  await stopping;
});
