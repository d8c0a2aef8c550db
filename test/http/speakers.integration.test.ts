// Speech profile and people over real sockets, on sqlite and PostgreSQL: an espeak-ng voice padded with silence is
// uploaded, trimmed by the Silero gate and embedded on the embedding thread; people and their voice samples are
// listed, played back as WAV and deleted, with the person's voiceprint rebuilt; bad uploads get their 400s.
import t from 'tap';
import { encodeWav, parseWav, samplesOf } from '../../engine/audio/wav.js';
import { cosineSimilarity, meanEmbedding } from '../../engine/speakers/embedding.js';
import { MAX_PEOPLE } from '../../engine/db/voiceprints.js';
import { MAX_PROFILE_UPLOAD_BYTES } from '../../http/routes/speakers.js';
import { startService, type TestService } from '../helpers/service.js';
import { STORES } from '../helpers/stores.js';
import { concat, silence } from '../helpers/speech.js';
import { SENTENCES, formFile, voice, wavForm } from '../helpers/voices.js';
import { bearer } from '../helpers/http.js';

const dir = t.testdir();
/** About 17 s of one voice, and two sentences of another. */
const alice = concat(...SENTENCES.map((s, i) => voice(dir, `alice-${i}`, 'en-us+f2', s)));
const bob = concat(voice(dir, 'bob-0', 'en-us+m3', SENTENCES[0]!), voice(dir, 'bob-1', 'en-us+m3', SENTENCES[1]!));

async function upload(s: TestService, uid: string, form: { body: Buffer; contentType: string }) {
  return s.req('/v3/upload-audio', { method: 'POST', body: form.body, headers: { ...bearer(await s.token(uid)), 'content-type': form.contentType } });
}

/** GET answered as bytes (the test client reads text). */
async function bytes(s: TestService, uid: string, path: string): Promise<{ status: number; type: string | null; body: Buffer }> {
  const res = await fetch(new URL(path, s.url), { headers: bearer(await s.token(uid)) });
  return { status: res.status, type: res.headers.get('content-type'), body: Buffer.from(await res.arrayBuffer()) };
}

for (const store of STORES) t.test(`on ${store}`, async (t) => {
  // One service per store: starting one is what takes the time here.
  const s = await startService(t, { store });

  t.test('speech profile: upload, state, audio back, voiceprint, delete', async (t) => {
    t.same((await s.req('/v3/speech-profile', { headers: bearer(await s.token('u1')) })).json, { has_profile: false });

    const padded = concat(silence(3), alice, silence(4));
    const res = await upload(s, 'u1', wavForm(padded));
    t.equal(res.status, 200, res.text);
    t.equal(res.json.url, '/v3/speech-profile/audio');
    t.equal(res.json.has_profile, true);
    const seconds = res.json.speech_seconds as number;
    t.ok(seconds > 10 && seconds < alice.length / 16000 + 1, `the silence around the speech is cut: ${seconds} s kept of ${(padded.length / 16000).toFixed(1)}`);

    t.same((await s.req('/v3/speech-profile', { headers: bearer(await s.token('u1')) })).json, { has_profile: true });
    t.same((await s.req('/v3/speech-profile', { headers: bearer(await s.token('u2')) })).json, { has_profile: false }, 'another user has none');

    const audio = await bytes(s, 'u1', '/v3/speech-profile/audio');
    t.equal(audio.status, 200);
    t.equal(audio.type, 'audio/wav');
    const wav = parseWav(audio.body);
    t.match(wav, { sampleRate: 16000, channels: 1, bitsPerSample: 16, format: 1 });
    const kept = samplesOf(wav);
    t.equal(kept.length, Math.round(seconds * 16000), 'the WAV holds what was counted as speech');
    t.equal((await bytes(s, 'u2', '/v3/speech-profile/audio')).status, 404, "another user cannot hear it");

    const { voiceprints, speakerEmbeddings } = s.service.services;
    const profile = (await voiceprints.getProfile('u1'))!;
    t.equal(profile.model, speakerEmbeddings.model);
    t.equal(profile.embedding.length, speakerEmbeddings.dimension);
    t.ok(cosineSimilarity(profile.embedding, await speakerEmbeddings.embed(kept)) > 0.9999, 'the stored print is the embedding of the stored speech');
    const self = cosineSimilarity(profile.embedding, await speakerEmbeddings.embed(alice.subarray(0, 16000 * 4)));
    const other = cosineSimilarity(profile.embedding, await speakerEmbeddings.embed(bob));
    t.ok(self > other, `the owner's voice scores higher than another's (${self.toFixed(3)} > ${other.toFixed(3)})`);

    const del = await s.req('/v3/speech-profile', { method: 'DELETE', headers: bearer(await s.token('u1')) });
    t.same(del.json, { success: true });
    t.same((await s.req('/v3/speech-profile', { headers: bearer(await s.token('u1')) })).json, { has_profile: false });
    t.equal((await bytes(s, 'u1', '/v3/speech-profile/audio')).status, 404);
    t.equal(await voiceprints.getProfile('u1'), null, 'audio and embedding are gone');
    t.equal((await s.req('/v3/speech-profile', { method: 'DELETE', headers: bearer(await s.token('u1')) })).status, 200, 'deleting again is harmless');
  });

  t.test('people and voice samples', async (t) => {
    const h1 = bearer(await s.token('u1'));
    const h2 = bearer(await s.token('u2'));
    const created = await s.req('/v1/users/people', { method: 'POST', body: { name: '  Bob  ' }, headers: h1 });
    t.equal(created.status, 200, created.text);
    t.match(created.json, { name: 'Bob', sample_count: 0 });
    const id = created.json.id as string;
    t.equal((await s.req('/v1/users/people', { method: 'POST', body: { name: '   ' }, headers: h1 })).status, 422, 'blank name');
    t.equal((await s.req('/v1/users/people', { method: 'POST', body: { name: 'x'.repeat(101) }, headers: h1 })).status, 422, 'name too long');

    const renamed = await s.req(`/v1/users/people/${id}`, { method: 'PATCH', body: { name: 'Robert' }, headers: h1 });
    t.equal(renamed.json.name, 'Robert');
    t.same((await s.req('/v1/users/people', { headers: h1 })).json.map((p: { id: string }) => p.id), [id]);
    t.same((await s.req('/v1/users/people', { headers: h2 })).json, [], "another user's list is empty");
    for (const [method, path] of [['GET', `/v1/users/people/${id}`], ['PATCH', `/v1/users/people/${id}`], ['DELETE', `/v1/users/people/${id}`], ['GET', `/v1/users/people/${id}/samples`]] as const) {
      const res = await s.req(path, { method, headers: h2, ...(method === 'PATCH' ? { body: { name: 'Mallory' } } : {}) });
      t.equal(res.status, 404, `${method} ${path} as another user`);
      t.equal(res.headers['x-error-code'], 'ENG_ERR_RESOURCE_NOT_FOUND');
    }

    const { voiceprints } = s.service.services;
    t.same(await voiceprints.findPersonByName('u1', 'robert'), { id, name: 'Robert' }, 'names are found whatever their case');
    t.equal(await voiceprints.addPersonSample('u2', id, { pcm: bob, sampleRate: 16000 }), null, "a sample for another user's person is refused");
    const first = (await voiceprints.addPersonSample('u1', id, { pcm: bob.subarray(0, bob.length >> 1), sampleRate: 16000, conversationId: 'c1', segmentId: 's1' }))!;
    const second = (await voiceprints.addPersonSample('u1', id, { pcm: bob.subarray(bob.length >> 1), sampleRate: 16000 }))!;
    t.equal((await s.req(`/v1/users/people/${id}`, { headers: h1 })).json.sample_count, 2);

    const samples = await s.req(`/v1/users/people/${id}/samples`, { headers: h1 });
    t.same(samples.json.map((x: { id: string }) => x.id).sort(), [first.sampleId, second.sampleId].sort());
    t.match(samples.json.find((x: { id: string }) => x.id === first.sampleId), { conversation_id: 'c1', segment_id: 's1', seconds: Math.floor(bob.length / 2) / 16000 });

    const clip = await bytes(s, 'u1', `/v1/users/people/${id}/samples/${first.sampleId}/audio`);
    t.equal(clip.status, 200);
    t.same(samplesOf(parseWav(clip.body)), bob.subarray(0, bob.length >> 1), 'the sample plays back as it was stored');
    t.equal((await bytes(s, 'u2', `/v1/users/people/${id}/samples/${first.sampleId}/audio`)).status, 404);

    // The print is the normalised mean of the samples' embeddings.
    const e1 = await s.service.services.speakerEmbeddings.embed(bob.subarray(0, bob.length >> 1));
    const e2 = await s.service.services.speakerEmbeddings.embed(bob.subarray(bob.length >> 1));
    const [both] = await voiceprints.listPeopleEmbeddings('u1');
    t.ok(cosineSimilarity(both!.embedding, meanEmbedding([e1, e2], e1.length)) > 0.9999, 'print of two samples');

    t.equal((await s.req(`/v1/users/people/${id}/samples/${first.sampleId}`, { method: 'DELETE', headers: h2 })).status, 404);
    t.same((await s.req(`/v1/users/people/${id}/samples/${first.sampleId}`, { method: 'DELETE', headers: h1 })).json, { success: true });
    const [one] = await voiceprints.listPeopleEmbeddings('u1');
    t.ok(cosineSimilarity(one!.embedding, e2) > 0.9999, 'after a delete the print is the remaining sample');
    await s.req(`/v1/users/people/${id}/samples/${second.sampleId}`, { method: 'DELETE', headers: h1 });
    t.same(await voiceprints.listPeopleEmbeddings('u1'), [], 'a person without samples has no print');

    await voiceprints.addPersonSample('u1', id, { pcm: bob, sampleRate: 16000 });
    t.same((await s.req(`/v1/users/people/${id}`, { method: 'DELETE', headers: h1 })).json, { success: true });
    t.equal((await s.req(`/v1/users/people/${id}`, { headers: h1 })).status, 404);
    t.equal(await voiceprints.listSamples('u1', id), null, 'its samples went with it');
  });
});

t.test('bounds', async (t) => {
  const s = await startService(t, { env: { MAX_BODY_BYTES: '65536' } });

  t.test('bad uploads get clear 400s and store nothing', async (t) => {
    const check = async (name: string, form: { body: Buffer; contentType: string }, status: number, code: string, message: RegExp) => {
      const res = await upload(s, 'u1', form);
      t.equal(res.status, status, `${name}: ${res.text}`);
      t.equal(res.headers['x-error-code'], code, name);
      t.match(res.json?.detail ?? '', message, name);
    };
    await check('JSON instead of a form', { body: Buffer.from('{"file":"x"}'), contentType: 'application/json' }, 400, 'ENG_ERR_AUDIO_INVALID', /multipart\/form-data/);
    await check('no file field', formFile('audio', 'a.wav', encodeWav(alice, 16000)), 400, 'ENG_ERR_AUDIO_INVALID', /field 'file'/);
    await check('cut-short form', { ...wavForm(alice), body: wavForm(alice).body.subarray(0, 5000) }, 400, 'ENG_ERR_AUDIO_INVALID', /Malformed form data/);
    await check('not WAV', formFile('file', 'a.mp3', Buffer.from('ID3\x03\x00\x00\x00 not audio at all')), 400, 'ENG_ERR_AUDIO_INVALID', /Invalid audio file \(not a WAV file\)/);
    await check('44.1 kHz', wavForm(alice, 44100), 400, 'ENG_ERR_AUDIO_INVALID', /Invalid codec, must be 16 kHz mono 16-bit PCM WAV \(got 44100 Hz/);
    const stereo = encodeWav(alice, 16000);
    stereo.writeUInt16LE(2, 22);
    await check('stereo', formFile('file', 'a.wav', stereo), 400, 'ENG_ERR_AUDIO_INVALID', /Invalid codec.*2 channel/);
    await check('too little speech, padded with silence', wavForm(concat(silence(10), bob.subarray(0, 16000 * 3), silence(10))), 400, 'ENG_ERR_PROFILE_DURATION', /must be 5-120 seconds of speech; found [0-4]\.\d s/);
    await check('only silence', wavForm(silence(20)), 400, 'ENG_ERR_PROFILE_DURATION', /found 0\.0 s/);
    const long = concat(...Array.from({ length: 8 }, () => alice));
    await check('too much speech', wavForm(long), 400, 'ENG_ERR_PROFILE_DURATION', /found 1[2-9]\d\.\d s/);
    const huge = wavForm(new Int16Array(MAX_PROFILE_UPLOAD_BYTES / 2));
    const res = await upload(s, 'u1', huge);
    t.equal(res.status, 413, 'larger than the upload bound');
    t.match(res.json.detail, new RegExp(`limit is ${MAX_PROFILE_UPLOAD_BYTES} bytes`));
    t.same((await s.req('/v3/speech-profile', { headers: bearer(await s.token('u1')) })).json, { has_profile: false }, 'nothing was stored');
    t.equal((await s.req('/v3/upload-audio', { method: 'POST', body: wavForm(alice).body, headers: { 'content-type': wavForm(alice).contentType } })).status, 401, 'an ID token is needed');
  });

  t.test(`an account holds at most ${MAX_PEOPLE} people`, async (t) => {
    for (let i = 0; i < MAX_PEOPLE; i++) await s.service.services.voiceprints.createPerson('u1', `p${i}`);
    const res = await s.req('/v1/users/people', { method: 'POST', body: { name: 'one more' }, headers: bearer(await s.token('u1')) });
    t.equal(res.status, 409);
    t.equal(res.headers['x-error-code'], 'ENG_ERR_PEOPLE_LIMIT');
    t.equal((await s.req('/v1/users/people', { method: 'POST', body: { name: 'theirs' }, headers: bearer(await s.token('u2')) })).status, 200, 'the bound is per account');
  });
});
