// The /v4/listen query: defaults, rewrites and every refusal.
import t from 'tap';
import { parseListenQuery } from '../../../engine/listen/listen-query.js';

t.test('defaults', async (t) => {
  const r = parseListenQuery('uid=u1');
  t.same(r, {
    ok: true,
    params: { uid: 'u1', language: 'en', sampleRate: 8000, codec: 'pcm8', channels: 1, includeSpeechProfile: true, conversationTimeoutS: 120, sttService: null, customStt: false, source: 'omi', ack: false, resume: null },
  });
});

t.test('values', async (t) => {
  const r = parseListenQuery('uid=u1&language=auto&sample_rate=16000&codec=opus&channels=2&include_speech_profile=false&conversation_timeout=14400&stt_service=provider_b&custom_stt=enabled&source=openglass');
  t.ok(r.ok);
  if (!r.ok) return;
  t.equal(r.params.language, 'multi', 'auto → multi');
  t.equal(r.params.sampleRate, 16000);
  t.equal(r.params.channels, 2);
  t.equal(r.params.includeSpeechProfile, false);
  t.equal(r.params.conversationTimeoutS, 14400);
  t.equal(r.params.sttService, 'provider_b');
  t.equal(r.params.customStt, true);
  t.equal(r.params.source, 'openglass');
  t.ok(parseListenQuery('uid=u1&conversation_timeout=2').ok, '2 is the minimum');
  t.ok(parseListenQuery('uid=u1&language=multi').ok);
  t.ok(parseListenQuery('uid=u1&codec=whatever').ok, 'codec is checked by the codec layer (close 1003)');
});

t.test('refusals name the parameter', async (t) => {
  for (const [q, name] of [
    ['', 'uid'],
    ['uid=', 'uid'],
    ['uid=u&conversation_timeout=1', 'conversation_timeout'],
    ['uid=u&conversation_timeout=14401', 'conversation_timeout'],
    ['uid=u&conversation_timeout=2.5', 'conversation_timeout'],
    ['uid=u&sample_rate=abc', 'sample_rate'],
    ['uid=u&channels=x', 'channels'],
    ['uid=u&include_speech_profile=maybe', 'include_speech_profile'],
    ['uid=u&stt_service=deepgram', 'stt_service'],
    ['uid=u&custom_stt=on', 'custom_stt'],
    ['uid=u&language=English!', 'language'],
  ] as const) {
    const r = parseListenQuery(q);
    t.equal(r.ok, false, q);
    if (!r.ok) t.match(r.reason, name);
  }
});
