// Conformance of the fake's pre-recorded API: Deepgram's own SDK (@deepgram/sdk v5) sends a file to it and reads the
// answer with its own types, so the fake's request checks and response shape stay Deepgram's.
import t from 'tap';
import { DeepgramClient, DeepgramEnvironment } from '@deepgram/sdk';
import { encodeWav } from '../../engine/audio/wav.js';
import { silence } from '../helpers/speech.js';
import { startFakeDeepgram } from './deepgram-server.js';

/** The HTTP status the SDK's error carries; 200 when the call succeeded. */
async function status(p: Promise<unknown>): Promise<number> {
  try {
    await p;
    return 200;
  } catch (err) {
    return (err as { statusCode?: number }).statusCode ?? 0;
  }
}

t.test('the SDK transcribes a file and reads the scripted transcript', async (t) => {
  const fake = await startFakeDeepgram({ apiKey: 'sdk-key' });
  t.teardown(() => fake.close());
  const base = fake.url.replace('ws://', 'http://').replace('/v1/listen', '');
  const client = new DeepgramClient({ apiKey: 'sdk-key', environment: { ...DeepgramEnvironment.Production, base } });
  fake.prerecorded.script({ kind: 'answer', transcript: 'Hello there, world.', detectedLanguage: 'de' });
  const answer = (await client.listen.v1.media.transcribeFile(encodeWav(silence(2), 16000), { model: 'nova-3', smart_format: true, detect_language: true } as any)) as any;
  const channel = answer.results.channels[0];
  t.equal(channel.alternatives[0].transcript, 'Hello there, world.');
  t.same(channel.alternatives[0].words.map((w: any) => w.punctuated_word), ['Hello', 'there,', 'world.']);
  t.equal(channel.detected_language, 'de');
  t.equal(answer.metadata.duration, 2);
  const seen = fake.prerecorded.requests[0]!;
  t.equal(seen.query.get('model'), 'nova-3');
  t.equal(seen.query.get('detect_language'), 'true');
  t.equal(seen.samples!.length, 32000, 'the fake read the WAV the SDK sent');

  const refused = new DeepgramClient({ apiKey: 'wrong', environment: { ...DeepgramEnvironment.Production, base } });
  t.equal(await status(refused.listen.v1.media.transcribeFile(encodeWav(silence(1), 16000), { model: 'nova-3' } as any)), 401, 'a wrong key');
  t.equal(await status(client.listen.v1.media.transcribeFile(Buffer.from('not audio at all'), { model: 'nova-3' } as any)), 400, 'bytes that are no audio container');
  t.equal(await status(client.listen.v1.media.transcribeFile(encodeWav(silence(1), 16000), { model: 'nova-3', language: 'tlh' } as any)), 400, 'a language the model does not serve');
});
