// Live speaker identification end to end: a device streams two espeak-ng voices through provider_a's fake, which
// labels them as two speakers; the owner's voice matches the profile uploaded, the other a stored person, each once.
// Synthetic voices are more regular than people: these matches are easier than real ones.
import t, { type Test } from 'tap';
import { startService, type TestService } from '../../helpers/service.js';
import { advance, open, type ListenClient } from '../../helpers/listen.js';
import { until, waitFor } from '../../helpers/until.js';
import { silence, concat } from '../../helpers/speech.js';
import { SENTENCES, voice as render, wavForm } from '../../helpers/voices.js';
import { bearer } from '../../helpers/http.js';
import { startFakeDeepgram, type FakeDeepgram, type ScriptedWord } from '../../fakes/deepgram-server.js';
import type { SessionActor } from '../../../engine/listen/session-actor.js';

const dir = t.testdir();

const voice = (v: string, text: string, name: string): Int16Array => render(dir, name, v, text);

/** Uploads `pcm` as `uid`'s speech profile through POST /v3/upload-audio. */
async function uploadProfile(t: Test, ts: TestService, uid: string, pcm: Int16Array): Promise<void> {
  const form = wavForm(pcm);
  const res = await ts.req('/v3/upload-audio', { method: 'POST', body: form.body, headers: { ...bearer(await ts.token(uid)), 'content-type': form.contentType } });
  t.equal(res.status, 200, 'the profile was uploaded');
}

const OWNER = 'en-us+m3';
const OTHER = 'en-us+f2';
const seconds = (pcm: Int16Array): number => pcm.length / 16000;

/** `text`'s words spread evenly over [from, to] seconds, said by `speaker`. */
function words(text: string, speaker: number, from: number, to: number): ScriptedWord[] {
  const list = text.split(' ');
  const step = (to - from) / list.length;
  return list.map((w, i) => ({ word: w.toLowerCase().replace(/[.,]/g, ''), punctuated_word: w, speaker, start: from + i * step, end: from + (i + 0.9) * step }));
}

async function provider(t: Test): Promise<FakeDeepgram> {
  const fake = await startFakeDeepgram({ sweepEveryMs: 0 });
  t.teardown(() => fake.close());
  return fake;
}

const providerA = (fake: FakeDeepgram): Record<string, string> => ({ STT_PROVIDERS: 'provider_a', PROVIDER_A_URL: fake.url, PROVIDER_A_API_KEY: 'test-key' });

/** Sends 16 kHz pcm16 in 100 ms messages and waits until the session took them all. */
async function stream(c: ListenClient, actor: SessionActor, pcm: Int16Array): Promise<void> {
  let n = 0;
  for (let i = 0; i < pcm.length; i += 1600, n++) c.ws.send(new Uint8Array(pcm.buffer, pcm.byteOffset + i * 2, Math.min(1600, pcm.length - i) * 2).slice());
  await until(() => actor.stats.audioMessages >= n, { what: 'the audio received' });
}

/** Steps the session until `done` holds for what it sent: the latest version of each segment, and every other message. */
async function collect(ts: TestService, c: ListenClient, done: (segments: Map<string, any>, others: any[]) => boolean): Promise<{ segments: Map<string, any>; others: any[] }> {
  const segments = new Map<string, any>();
  const others: any[] = [];
  await until(
    async () => {
      await advance(ts, 600);
      for (;;) {
        const m = await c.json(() => true, 50).catch(() => undefined);
        if (m === undefined) break;
        if (Array.isArray(m)) for (const s of m) segments.set(s.id, s);
        else others.push(m);
      }
      return done(segments, others);
    },
    { what: 'identification', timeoutMs: 30_000 },
  );
  return { segments, others };
}

const suggestions = (others: any[]): any[] => others.filter((m) => m.type === 'speaker_label_suggestion');

t.test('the owner by the profile, a stored person by their samples: is_user, person_id, one suggestion each; speaker_assigned adds a sample', async (t) => {
  const fake = await provider(t);
  const ts = await startService(t, { env: providerA(fake) });
  const { voiceprints } = ts.service.services;
  await uploadProfile(t, ts, 'u1', concat(voice(OWNER, SENTENCES[1]!, 'profile-0'), voice(OWNER, SENTENCES[2]!, 'profile-1')));
  const bob = await voiceprints.createPerson('u1', 'Bob');
  t.ok(await voiceprints.addPersonSample('u1', bob.id, { pcm: voice(OTHER, SENTENCES[3]!, 'bob'), sampleRate: 16000 }));

  const [ownerText, otherText] = [SENTENCES[4]!, SENTENCES[0]!];
  const a = voice(OWNER, ownerText, 'live-owner');
  const b = voice(OTHER, otherText, 'live-other');
  const bStart = seconds(a) + 0.5;
  const bEnd = bStart + seconds(b);
  fake.fallback = {
    kind: 'accept',
    results: [
      { afterS: seconds(a) + 0.2, words: words(ownerText, 0, 0.05, seconds(a) - 0.05) },
      { afterS: bEnd + 0.2, words: words(otherText, 1, bStart + 0.05, bEnd - 0.05) },
    ],
  };
  const c = await open(ts, { uid: 'u1', codec: 'pcm16', sample_rate: '16000' });
  await c.ready();
  const actor = ts.service.sessions.sessionsOf('u1')[0]!;
  await until(() => actor.speakerIdentification === 'on', { what: 'the profile and people loaded' });
  await stream(c, actor, concat(a, silence(0.5), b, silence(1)));

  const { segments, others } = await collect(ts, c, (segs, rest) => suggestions(rest).length >= 2 && [...segs.values()].every((s) => s.speech_profile_processed));
  const bySpeaker = (id: number): any[] => [...segments.values()].filter((s) => s.speaker_id === id);
  t.ok(bySpeaker(0).length > 0 && bySpeaker(1).length > 0, 'both speakers have segments');
  t.match(bySpeaker(0), bySpeaker(0).map(() => ({ is_user: true, person_id: null, speech_profile_processed: true })), "the owner's segments are the user's");
  t.match(bySpeaker(1), bySpeaker(1).map(() => ({ is_user: false, person_id: bob.id, speech_profile_processed: true })), "the other voice's are Bob's, compared with the profile too");
  const sent = suggestions(others);
  t.equal(sent.length, 2, 'one suggestion per speaker');
  const [mine, bobs] = [sent.find((m) => m.speaker_id === 0), sent.find((m) => m.speaker_id === 1)];
  t.match(mine, { person_id: 'user', person_name: 'User' });
  t.ok(bySpeaker(0).some((s) => s.id === mine.segment_id), "the owner's suggestion names the owner's segment");
  t.match(bobs, { person_id: bob.id, person_name: 'Bob' });
  t.ok(bySpeaker(1).some((s) => s.id === bobs.segment_id), "Bob's suggestion names Bob's segment");
  const stored = await ts.service.services.conversations.segments(actor.conversationId!);
  t.match(stored.map((s) => [s.speakerId, s.isUser, s.personId, s.speechProfileProcessed]), stored.map((s) => (s.speakerId === 0 ? [0, true, null, true] : [1, false, bob.id, true])), 'as stored');

  // The client confirms Bob: the clip of his voice becomes a sample, naming the segment.
  c.ws.send(JSON.stringify({ type: 'speaker_assigned', speaker_id: 1, person_id: bob.id, person_name: 'Bob', segment_ids: [bobs.segment_id] }));
  await until(async () => ((await voiceprints.listSamples('u1', bob.id)) ?? []).length === 2, { what: 'the sample added', timeoutMs: 20_000 });
  const samples = (await voiceprints.listSamples('u1', bob.id))!;
  t.match(samples.find((s) => s.segmentId === bobs.segment_id), { conversationId: actor.conversationId }, 'the sample names its segment and conversation');
  // Counted once the store has also rewritten Bob's print.
  const metrics = await waitFor(async () => {
    const text = (await ts.req('/metrics')).text;
    return /listen_speaker_samples_total 1/.test(text) ? text : undefined;
  }, { what: 'the sample counted' });
  t.match(metrics, /listen_speaker_matches_total\{kind="user"\} 1/);
  t.match(metrics, /listen_speaker_matches_total\{kind="person"\} 1/);
  c.close();
  await c.closed;
});

t.test('no window without a profile or people, nor with include_speech_profile=false; a name given suggests a person', async (t) => {
  const fake = await provider(t);
  const ts = await startService(t, { env: providerA(fake) });
  const { voiceprints } = ts.service.services;
  const text = 'Hi there, my name is Carol.';
  const pcm = voice(OTHER, text, 'carol');
  fake.fallback = { kind: 'accept', results: [{ afterS: seconds(pcm) + 0.2, words: words(text, 1, 0.05, seconds(pcm) - 0.05) }] };

  // u2 has a profile but turns identification off: nothing is loaded or kept.
  await uploadProfile(t, ts, 'u2', concat(voice(OWNER, SENTENCES[1]!, 'profile-0'), voice(OWNER, SENTENCES[2]!, 'profile-1')));
  const off = await open(ts, { uid: 'u2', codec: 'pcm16', sample_rate: '16000', include_speech_profile: 'false' });
  await off.ready();
  const offActor = ts.service.sessions.sessionsOf('u2')[0]!;
  t.equal(offActor.speakerIdentification, undefined, 'include_speech_profile=false: no identification at all');

  // u1 has neither: no window, but the name the speaker gives still counts.
  const c = await open(ts, { uid: 'u1', codec: 'pcm16', sample_rate: '16000' });
  await c.ready();
  const actor = ts.service.sessions.sessionsOf('u1')[0]!;
  await until(() => actor.speakerIdentification === 'off', { what: 'nothing to compare' });
  await stream(c, actor, concat(pcm, silence(1)));
  const { segments, others } = await collect(ts, c, (_segs, rest) => suggestions(rest).length >= 1);
  const carol = await voiceprints.findPersonByName('u1', 'carol');
  t.ok(carol, 'Carol was created');
  t.same(suggestions(others), [{ type: 'speaker_label_suggestion', speaker_id: 1, person_id: carol!.id, person_name: 'Carol', segment_id: suggestions(others)[0].segment_id }]);
  t.match(segments.get(suggestions(others)[0].segment_id), { speaker_id: 1, person_id: carol!.id, is_user: false, speech_profile_processed: false }, 'the named segment carries Carol, never compared with a profile');
  t.equal(actor.speakerIdentification, 'off', 'still no window');

  await stream(off, offActor, concat(pcm, silence(1)));
  const offSegments = await collect(ts, off, (segs) => segs.size > 0);
  t.match([...offSegments.segments.values()], [{ is_user: false, person_id: null, speech_profile_processed: false }], 'the identification-off session marks nothing');
  t.equal(suggestions(offSegments.others).length, 0, 'and suggests nothing, though the speaker gave a name');
  c.close();
  off.close();
  await Promise.all([c.closed, off.closed]);
});
