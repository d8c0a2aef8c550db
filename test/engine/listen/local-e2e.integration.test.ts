// The default engine end to end: espeak-ng speech as opus_fs320 over a real socket, PocketSphinx behind the Silero gate, segments to the client and the store.
import t from 'tap';
import { startService } from '../../helpers/service.js';
import { bearer } from '../../helpers/http.js';
import { advance, open } from '../../helpers/listen.js';
import { until, waitFor } from '../../helpers/until.js';
import { OpusEncoderStream } from '../../../native/opus.js';
import { frames } from '../../helpers/codec-fixtures.js';
import { concat, silence, speak } from '../../helpers/speech.js';

// PocketSphinx is weak on synthetic speech, and its words vary between runs (how the decoded audio is batched into
// its blocks moves its live CMN). Of the phrases tried, this one kept "the weather is" on every run; "what is the
// weather like today" sometimes came back as "what is that when i'm on it and you". Two of its words are asked for.
const PHRASE = 'the weather is nice today';
const EXPECTED = PHRASE.split(' ');

t.test('local engine (default): opus_fs320 speech → transcript segments on the socket and in the store', async (t) => {
  // No sttEngines: the service builds its default, LocalGatedEngine (VAD_GATE=on).
  const ts = await startService(t);
  const c = await open(ts, { uid: 'u1', codec: 'opus_fs320', sample_rate: '16000', source: 'omi' });
  await c.ready();
  const actor = ts.service.sessions.sessionsOf('u1')[0]!;

  // Speech between pauses: the trailing second lets the speech gate end the utterance, so the segment comes before close.
  const pcm = concat(silence(0.5), speak(t.testdir(), PHRASE), silence(1));
  const durationS = pcm.length / 16000;
  const enc = new OpusEncoderStream(16000);
  const packets = frames(pcm, 320).map((f) => enc.encode(f)); // one 20 ms packet per message
  for (const p of packets) c.ws.send(p);
  await until(() => actor.stats.audioMessages === packets.length, { what: 'every packet received' });

  // The 600 ms loop runs on the manual clock: step it until the engine's segment was sent.
  const segments: any[] = await waitFor(
    async () => {
      await advance(ts, 600);
      return c.json((m) => Array.isArray(m) && m.length > 0, 250).catch(() => undefined);
    },
    { what: 'transcript segments on the socket', timeoutMs: 30_000 },
  );
  const text = segments.map((s) => s.text).join(' ');
  t.comment(`heard: "${text}" for "${PHRASE}" (${durationS.toFixed(2)} s of audio)`);
  for (const s of segments) {
    t.same(Object.keys(s).sort(), ['end', 'id', 'is_user', 'person_id', 'speaker', 'speaker_id', 'speech_profile_processed', 'start', 'stt_provider', 'text'], 'the fields of a transcript segment');
    t.match(s, { stt_provider: 'local', speaker: /^SPEAKER_\d\d$/, speaker_id: Number, is_user: Boolean, speech_profile_processed: Boolean, text: String });
    t.ok(s.start >= 0 && s.start < s.end && s.end <= durationS + 0.1, `times within the audio: ${s.start}–${s.end} of ${durationS.toFixed(2)} s`);
  }
  t.ok(segments[0].start >= 0.3, 'the first word comes after the leading silence');
  const heard = new Set(text.toLowerCase().split(/[^a-z']+/));
  const found = EXPECTED.filter((w) => heard.has(w));
  t.ok(found.length >= 2, `at least two of ${EXPECTED.join(', ')} recognised (${found.join(', ')})`);

  // Close: the session drains and the conversation's transcript is stored.
  const id = actor.conversationId!;
  t.ok(id, 'the audio opened a conversation');
  c.close();
  await c.closed;
  await until(() => ts.service.sessions.size === 0, { what: 'session drained', timeoutMs: 20_000 });
  const res = await ts.req(`/v1/dev/user/conversations/${id}?include_transcript=true`, { headers: bearer(await ts.token('u1')) });
  t.equal(res.status, 200);
  t.equal(res.json.source, 'omi');
  t.same(
    res.json.transcript_segments.map((s: { text: string }) => s.text),
    segments.map((s) => s.text),
    'the transcript is stored',
  );
});
