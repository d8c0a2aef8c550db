// What a live conversation records about where its speech came from: `speech_profile_processed` on each segment and
// the conversation's `source` from the /v4/listen query (the known values, a documented default, a catch-all for the rest).
import t, { type Test } from 'tap';
import { startService, type TestService } from '../../helpers/service.js';
import { bearer } from '../../helpers/http.js';
import { advance, open } from '../../helpers/listen.js';
import { until } from '../../helpers/until.js';
import { RecordingSttEngine } from '../../fakes/recording-stt.js';
import { sine } from '../../helpers/codec-fixtures.js';

/** Opens a pcm16 session, sends 0.2 s of audio, has the engine say one line; answers the segments and the conversation. */
async function record(t: Test, ts: TestService, engine: RecordingSttEngine, query: Record<string, string>): Promise<{ segments: any[]; conversation: any }> {
  const c = await open(ts, { uid: 'u1', codec: 'pcm16', sample_rate: '16000', ...query });
  await c.ready();
  const stream = engine.streams.at(-1)!;
  c.ws.send(new Uint8Array(sine(300, 16000, 0.2, 3000).buffer));
  await until(() => stream.samples >= 3000, { what: 'audio at the engine', timeoutMs: 20_000 });
  stream.emit([{ text: 'Where did I leave the keys?', speaker: 'SPEAKER_00', start: 0, end: 0.2 }]);
  await advance(ts, 600);
  const segments = await c.json((m) => Array.isArray(m));
  const id = ts.service.sessions.sessionsOf('u1')[0]!.conversationId!;
  const res = await ts.req(`/v1/dev/user/conversations/${id}`, { headers: bearer(await ts.token('u1')) });
  t.equal(res.status, 200);
  c.close();
  await c.closed;
  await until(() => ts.service.sessions.size === 0, { what: 'session closed' });
  return { segments, conversation: res.json };
}

t.test('speech_profile_processed is false without a speech profile, whatever include_speech_profile says', async (t) => {
  const engine = new RecordingSttEngine();
  const ts = await startService(t, { sttEngines: [engine] });
  const off = await record(t, ts, engine, { include_speech_profile: 'false' });
  t.match(off.segments, [{ text: 'Where did I leave the keys?', speech_profile_processed: false }], 'include_speech_profile=false: no profile used');
  await advance(ts, 200_000); // past the idle check: the next session starts a conversation of its own
  const on = await record(t, ts, engine, { include_speech_profile: 'true' });
  t.match(on.segments, [{ speech_profile_processed: false }], 'no profile exists for the user: none used either');
});

t.test('source: stored from the query, "omi" when the device sends none, an unknown value filed as "unknown"', async (t) => {
  const engine = new RecordingSttEngine();
  const ts = await startService(t, { sttEngines: [engine] });
  const none = await record(t, ts, engine, {});
  t.equal(none.conversation.source, 'omi', 'no source: the wearable itself');
  await advance(ts, 200_000);
  const glass = await record(t, ts, engine, { source: 'openglass' });
  t.equal(glass.conversation.source, 'openglass', 'a known source is stored');

  await advance(ts, 200_000);
  const other = await record(t, ts, engine, { source: 'walkie_talkie' });
  t.equal(other.conversation.source, 'unknown', 'a source this version does not know: recorded, filed under the catch-all');
});
