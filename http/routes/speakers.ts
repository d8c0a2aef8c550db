// The signed-in user's voiceprints: the speech profile (upload, state, audio, delete), the people they name, and each
// person's voice samples (list, listen, delete). Every id of another user answers 404.
import { Type } from '@sinclair/typebox';
import { EngineError, valueError } from '../../engine/errors.js';
import { encodeWav, isPcm16Mono, parseWav, samplesOf, WavError } from '../../engine/audio/wav.js';
import { MAX_PEOPLE, MAX_PERSON_NAME_CHARS, PeopleLimitError, VOICE_SAMPLE_RATE, type PersonRecord, type SampleRecord } from '../../engine/db/voiceprints.js';
import { boundaryOf, MultipartError, parseMultipart } from '../../engine/voice/multipart.js';
import { notFound, SuccessSchema, SUCCESS } from './common.js';
import type { Reply } from '../adapter.js';
import type { AppRoute, Services } from './types.js';

/** Speech a profile needs, after its silence is cut, in seconds (as the compatible system asks: 5-120). */
export const MIN_PROFILE_SPEECH_S = 5;
export const MAX_PROFILE_SPEECH_S = 120;
/** Largest profile upload: five minutes of 16 kHz 16-bit mono with its headers, room for pauses around 120 s of speech. */
export const MAX_PROFILE_UPLOAD_BYTES = 10 * 1024 * 1024;

const PROFILE_AUDIO_PATH = '/v3/speech-profile/audio';
const WAV_TYPE = 'audio/wav';

const ProfileState = Type.Object({ has_profile: Type.Boolean() }, { title: 'SpeechProfileState', description: 'whether the user has a speech profile' });
const ProfileUploaded = Type.Object({
  url: Type.String({ description: `where the stored speech can be fetched with the same ID token (${PROFILE_AUDIO_PATH})` }),
  has_profile: Type.Literal(true),
  speech_seconds: Type.Number({ description: 'seconds of speech kept once silence was cut; the voiceprint is made of these' }),
}, { title: 'SpeechProfileUploaded', description: 'the stored speech profile' });

const PersonSchema = Type.Object({
  id: Type.String(),
  name: Type.String(),
  created_at: Type.String({ format: 'date-time' }),
  updated_at: Type.String({ format: 'date-time' }),
  sample_count: Type.Integer({ minimum: 0, description: 'voice samples the person\'s voiceprint is made of' }),
}, { title: 'Person', description: 'someone the user knows, recognised in conversations by voice once they have samples' });
const PersonBody = Type.Object({ name: Type.String({ maxLength: MAX_PERSON_NAME_CHARS, description: 'must not be blank' }) }, { title: 'PersonName', description: 'the name of a new or renamed person' });
const SampleSchema = Type.Object({
  id: Type.String(),
  seconds: Type.Number(),
  created_at: Type.String({ format: 'date-time' }),
  conversation_id: Type.Union([Type.String(), Type.Null()]),
  segment_id: Type.Union([Type.String(), Type.Null()]),
}, { title: 'VoiceSample', description: 'a clip of a person\'s voice their voiceprint is made of' });

const personView = (p: PersonRecord): Record<string, unknown> => ({ id: p.id, name: p.name, created_at: p.createdAt, updated_at: p.updatedAt, sample_count: p.sampleCount });
const sampleView = (s: SampleRecord): Record<string, unknown> => ({ id: s.id, seconds: s.seconds, created_at: s.createdAt, conversation_id: s.conversationId, segment_id: s.segmentId });

const audioInvalid = (reason: string): EngineError => new EngineError('ENG_ERR_AUDIO_INVALID', { reason });
const wavReply = (pcm: Int16Array): Reply => ({ bytes: encodeWav(pcm, VOICE_SAMPLE_RATE), contentType: WAV_TYPE });

function checkedName(raw: string): string {
  const name = raw.trim();
  if (name.length === 0) throw valueError(['body', 'name'], 'Person name cannot be empty');
  return name;
}

/** The 16 kHz mono samples of the form's `file`, or a 400 saying what is wrong with the upload. */
function uploadedPcm(headers: Readonly<Record<string, string>>, raw: Buffer | undefined): Int16Array {
  const boundary = boundaryOf(headers['content-type']);
  if (boundary === undefined) throw audioInvalid("Expected multipart/form-data with a WAV file in the field 'file'");
  let parts;
  try {
    parts = parseMultipart(raw ?? Buffer.alloc(0), boundary);
  } catch (err) {
    if (err instanceof MultipartError) throw audioInvalid(`Malformed form data: ${err.reason}`);
    throw err;
  }
  const file = parts.find((p) => p.name === 'file');
  if (file === undefined || file.data.length === 0) throw audioInvalid("Expected a WAV file in the form field 'file'");
  let wav;
  try {
    wav = parseWav(file.data);
  } catch (err) {
    if (err instanceof WavError) throw audioInvalid(`Invalid audio file (${err.message}): upload a 16 kHz mono 16-bit PCM WAV`);
    throw err;
  }
  if (!isPcm16Mono(wav, VOICE_SAMPLE_RATE)) {
    throw audioInvalid(`Invalid codec, must be 16 kHz mono 16-bit PCM WAV (got ${wav.sampleRate} Hz, ${wav.channels} channel(s), ${wav.bitsPerSample}-bit${wav.format === 1 ? '' : `, format ${wav.format}`})`);
  }
  return samplesOf(wav);
}

const TAGS = ['Speech profile and people'];
const PERSON_NOT_FOUND = { description: 'no such person of yours' };
const SAMPLE_NOT_FOUND = { description: 'no such voice sample of that person of yours' };

export function speakerRoutes(s: Services): AppRoute[] {
  const requirePerson = async (uid: string, id: string): Promise<PersonRecord> => {
    const person = await s.voiceprints.getPerson(uid, id);
    if (person === null) throw notFound('Person');
    return person;
  };
  return [
    {
      method: 'post',
      path: '/v3/upload-audio',
      operationId: 'uploadSpeechProfile',
      summary: 'Upload your speech profile recording (signed-in user)',
      description:
        `multipart/form-data with a WAV file (16 kHz, mono, 16-bit PCM) in the field \`file\`, at most ${MAX_PROFILE_UPLOAD_BYTES} bytes. ` +
        `Silence is cut out (Silero VAD); ${MIN_PROFILE_SPEECH_S}-${MAX_PROFILE_SPEECH_S} seconds of speech must remain. Replaces an earlier profile.`,
      tags: TAGS,
      auth: { kind: 'id_token' },
      maxBodyBytes: MAX_PROFILE_UPLOAD_BYTES,
      responses: {
        200: { description: 'stored', schema: ProfileUploaded },
        400: { description: 'not a 16 kHz mono 16-bit WAV in `file`, or too little or too much speech' },
        413: { description: `larger than ${MAX_PROFILE_UPLOAD_BYTES} bytes` },
      },
      async handler({ auth, headers, raw }) {
        const pcm = uploadedPcm(headers, raw);
        let speech: Int16Array;
        try {
          speech = await s.silenceTrimmer.trimSilence(pcm);
        } catch {
          throw new EngineError('ENG_ERR_STT_VAD_FAILED', { reason: 'the recording could not be checked for speech' });
        }
        const seconds = speech.length / VOICE_SAMPLE_RATE;
        if (seconds < MIN_PROFILE_SPEECH_S || seconds > MAX_PROFILE_SPEECH_S) throw new EngineError('ENG_ERR_PROFILE_DURATION', { seconds: seconds.toFixed(1) });
        await s.users.ensure(auth.uid, s.clock.now(), s.config.memoryAccessDefault === 'enabled');
        const stored = await s.voiceprints.setProfile(auth.uid, speech, seconds);
        return { body: { url: PROFILE_AUDIO_PATH, has_profile: true, speech_seconds: Math.round(stored.speechSeconds * 1000) / 1000 } };
      },
    },
    {
      method: 'get',
      path: '/v3/speech-profile',
      operationId: 'getSpeechProfile',
      summary: 'Whether you have a speech profile (signed-in user)',
      tags: TAGS,
      auth: { kind: 'id_token' },
      responses: { 200: { description: 'the profile\'s state', schema: ProfileState } },
      async handler({ auth }) {
        return { body: { has_profile: await s.voiceprints.hasProfile(auth.uid) } };
      },
    },
    {
      method: 'delete',
      path: '/v3/speech-profile',
      operationId: 'deleteSpeechProfile',
      summary: 'Delete your speech profile: its audio and its voiceprint (signed-in user)',
      description: 'Idempotent: answers success when there was no profile.',
      tags: TAGS,
      auth: { kind: 'id_token' },
      responses: { 200: { description: 'deleted', schema: SuccessSchema } },
      async handler({ auth }) {
        await s.voiceprints.deleteProfile(auth.uid);
        return { body: SUCCESS };
      },
    },
    {
      method: 'get',
      path: PROFILE_AUDIO_PATH,
      operationId: 'getSpeechProfileAudio',
      summary: 'The speech your profile was made of, as a WAV file (signed-in user)',
      description: '16 kHz mono 16-bit PCM: the upload with its silence cut out.',
      tags: TAGS,
      auth: { kind: 'id_token' },
      responses: { 200: { description: 'audio/wav' }, 404: { description: 'no speech profile' } },
      async handler({ auth }) {
        const pcm = await s.voiceprints.profileAudio(auth.uid);
        if (pcm === null) throw notFound('Speech profile');
        return wavReply(pcm);
      },
    },
    {
      method: 'get',
      path: '/v1/users/people',
      operationId: 'listPeople',
      summary: 'List your people (signed-in user)',
      description: 'A bare array, oldest first.',
      tags: TAGS,
      auth: { kind: 'id_token' },
      responses: { 200: { description: 'the people, oldest first', schema: Type.Array(PersonSchema, { title: 'PersonList', description: 'people, oldest first' }) } },
      async handler({ auth }) {
        return { body: (await s.voiceprints.listPeople(auth.uid)).map(personView) };
      },
    },
    {
      method: 'post',
      path: '/v1/users/people',
      operationId: 'createPerson',
      summary: 'Add a person (signed-in user)',
      description: `Names are trimmed and must not be blank (422). An account has at most ${MAX_PEOPLE} people (409).`,
      tags: TAGS,
      auth: { kind: 'id_token' },
      body: PersonBody,
      responses: { 200: { description: 'the new person', schema: PersonSchema }, 409: { description: `you already have ${MAX_PEOPLE} people` } },
      async handler({ auth, body }) {
        const name = checkedName(body.name as string);
        await s.users.ensure(auth.uid, s.clock.now(), s.config.memoryAccessDefault === 'enabled');
        let created;
        try {
          created = await s.voiceprints.createPerson(auth.uid, name);
        } catch (err) {
          if (err instanceof PeopleLimitError) throw new EngineError('ENG_ERR_PEOPLE_LIMIT', { limit: MAX_PEOPLE });
          throw err;
        }
        return { body: personView(await requirePerson(auth.uid, created.id)) };
      },
    },
    {
      method: 'get',
      path: '/v1/users/people/{person_id}',
      operationId: 'getPerson',
      summary: 'One of your people (signed-in user)',
      tags: TAGS,
      auth: { kind: 'id_token' },
      responses: { 200: { description: 'the person', schema: PersonSchema }, 404: PERSON_NOT_FOUND },
      async handler({ auth, params }) {
        return { body: personView(await requirePerson(auth.uid, params.person_id!)) };
      },
    },
    {
      method: 'patch',
      path: '/v1/users/people/{person_id}',
      operationId: 'renamePerson',
      summary: 'Rename a person (signed-in user)',
      tags: TAGS,
      auth: { kind: 'id_token' },
      body: PersonBody,
      responses: { 200: { description: 'the renamed person', schema: PersonSchema }, 404: PERSON_NOT_FOUND },
      async handler({ auth, params, body }) {
        const name = checkedName(body.name as string);
        if (!(await s.voiceprints.renamePerson(auth.uid, params.person_id!, name))) throw notFound('Person');
        return { body: personView(await requirePerson(auth.uid, params.person_id!)) };
      },
    },
    {
      method: 'delete',
      path: '/v1/users/people/{person_id}',
      operationId: 'deletePerson',
      summary: 'Delete a person with their voice samples and voiceprint (signed-in user)',
      tags: TAGS,
      auth: { kind: 'id_token' },
      responses: { 200: { description: 'deleted', schema: SuccessSchema }, 404: PERSON_NOT_FOUND },
      async handler({ auth, params }) {
        if (!(await s.voiceprints.deletePerson(auth.uid, params.person_id!))) throw notFound('Person');
        return { body: SUCCESS };
      },
    },
    {
      method: 'get',
      path: '/v1/users/people/{person_id}/samples',
      operationId: 'listPersonSamples',
      summary: 'The voice samples a person\'s voiceprint is made of (signed-in user)',
      description: 'A bare array, oldest first.',
      tags: TAGS,
      auth: { kind: 'id_token' },
      responses: { 200: { description: 'the samples, oldest first', schema: Type.Array(SampleSchema, { title: 'VoiceSampleList', description: 'voice samples, oldest first' }) }, 404: PERSON_NOT_FOUND },
      async handler({ auth, params }) {
        const samples = await s.voiceprints.listSamples(auth.uid, params.person_id!);
        if (samples === null) throw notFound('Person');
        return { body: samples.map(sampleView) };
      },
    },
    {
      method: 'get',
      path: '/v1/users/people/{person_id}/samples/{sample_id}/audio',
      operationId: 'getPersonSampleAudio',
      summary: 'A voice sample as a WAV file (signed-in user)',
      description: '16 kHz mono 16-bit PCM.',
      tags: TAGS,
      auth: { kind: 'id_token' },
      responses: { 200: { description: 'audio/wav' }, 404: SAMPLE_NOT_FOUND },
      async handler({ auth, params }) {
        const pcm = await s.voiceprints.sampleAudio(auth.uid, params.person_id!, params.sample_id!);
        if (pcm === null) throw notFound('Voice sample');
        return wavReply(pcm);
      },
    },
    {
      method: 'delete',
      path: '/v1/users/people/{person_id}/samples/{sample_id}',
      operationId: 'deletePersonSample',
      summary: 'Delete a voice sample; the person\'s voiceprint is rebuilt from the others (signed-in user)',
      tags: TAGS,
      auth: { kind: 'id_token' },
      responses: { 200: { description: 'deleted', schema: SuccessSchema }, 404: SAMPLE_NOT_FOUND },
      async handler({ auth, params }) {
        if (!(await s.voiceprints.deleteSample(auth.uid, params.person_id!, params.sample_id!))) throw notFound('Voice sample');
        return { body: SUCCESS };
      },
    },
  ];
}
