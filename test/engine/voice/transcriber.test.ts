// The voice transcriber with each kind of engine: a speech gate that fails is never silence; provider_b over its
// realtime socket (the Soniox fake) fed faster than real time, its failures and a provider that stalls; the local
// engine (PocketSphinx) on real speech.
import t, { type Test } from 'tap';
import client from 'prom-client';
import { ManualClock } from '../../../engine/clock.js';
import { createLogger } from '../../../engine/logger.js';
import { Scheduler } from '../../../engine/scheduler.js';
import { registerVoiceMetrics } from '../../../engine/node/metrics.js';
import { ProviderAPrerecorded } from '../../../engine/stt/provider-a/prerecorded.js';
import { LocalGatedEngine } from '../../../engine/stt/local/engine.js';
import { StreamedVoiceEngine, type VoiceEngine } from '../../../engine/voice/engines.js';
import { SpeechCheck } from '../../../engine/voice/speech-check.js';
import { VoiceTranscriber } from '../../../engine/voice/transcriber.js';
import { VoiceFailure } from '../../../engine/voice/outcome.js';
import { startFakeDeepgram } from '../../fakes/deepgram-server.js';
import { rig } from '../../helpers/provider-b.js';
import { speak, silence } from '../../helpers/speech.js';
import { until } from '../../helpers/until.js';

function transcriber(t: Test, engines: VoiceEngine[], scheduler: Scheduler, check = new SpeechCheck()) {
  const registry = new client.Registry();
  const metrics = registerVoiceMetrics(registry);
  const voice = new VoiceTranscriber({ engines, check, scheduler, logger: createLogger('silent'), metrics });
  t.teardown(() => voice.close());
  return { voice, registry };
}

async function failure(p: Promise<unknown>): Promise<VoiceFailure['body']> {
  try {
    await p;
  } catch (err) {
    if (err instanceof VoiceFailure) return err.body;
    throw err;
  }
  throw new Error('expected a VoiceFailure');
}

const speech = (t: Test, text: string): Int16Array => speak(t.testdir(), text);

t.test('a speech gate that cannot run is never taken for silence', async (t) => {
  const fake = await startFakeDeepgram({ apiKey: 'k' });
  t.teardown(() => fake.close());
  const scheduler = new Scheduler({ clock: new ManualClock(), resolutionMs: 0 });
  t.teardown(() => scheduler.close());
  const engine = new ProviderAPrerecorded({ url: fake.url, apiKey: 'k' });
  const { voice, registry } = transcriber(t, [engine], scheduler, new SpeechCheck({ modelPath: '/nonexistent/silero.onnx' }));
  fake.prerecorded.script({ kind: 'answer', transcript: '' });
  const body = await failure(voice.transcribe(silence(2), 'en'));
  t.equal(body.outcome, 'empty_unexpected', 'silence the gate could not check went to the provider; its empty answer is unexpected');
  t.equal(fake.prerecorded.requests.length, 1);
  t.match(await registry.getSingleMetricAsString('voice_speech_gate_failures_total'), /voice_speech_gate_failures_total 1/);
});

t.test('provider_b: the realtime socket fed the whole message at once', async (t) => {
  const { fake, engine, scheduler, clock } = await rig(t);
  const voiceEngine = new StreamedVoiceEngine(engine, engine.model);
  const { voice } = transcriber(t, [voiceEngine], scheduler);
  const pcm = speech(t, 'Book a table for two');

  t.test('speech comes back as the final tokens, all audio acknowledged', async (t) => {
    fake.script({ tokens: [{ text: 'Book', start_ms: 100, end_ms: 400 }, { text: ' a table', start_ms: 400, end_ms: 900 }, { text: ' for two.', start_ms: 900, end_ms: 1400 }] });
    const result = await voice.transcribe(pcm, 'en');
    t.same(result, { transcript: 'Book a table for two.', language: 'en', stt_provider: 'provider_b', stt_model: 'stt-rt-v5', outcome: 'success' });
    const session = fake.sessions.at(-1)!;
    t.equal(session.audioBytes, pcm.byteLength, 'every sample reached the provider');
    t.equal(session.finalizes, 1);
  });

  t.test('an error frame is upstream_error', async (t) => {
    fake.script({ tokens: [], error: { afterMs: 0, code: 500, type: 'internal_error', message: 'provider detail that must not leak' } });
    const body = await failure(voice.transcribe(pcm, 'en'));
    t.match(body, { outcome: 'upstream_error', provider: 'provider_b', retryable: true });
    t.notMatch(JSON.stringify(body), /must not leak/);
  });

  t.test('a provider that stops answering is a timeout on the scheduler\'s clock', async (t) => {
    fake.script({ stall: true });
    const pending = failure(voice.transcribe(pcm, 'en'));
    await until(() => (fake.sessions.at(-1)?.audioBytes ?? 0) === pcm.byteLength, { what: 'the audio at the stalled provider' });
    clock.advance(60_001);
    await scheduler.tick();
    t.match(await pending, { outcome: 'timeout', provider: 'provider_b', retryable: true });
  });
});

t.test('local: PocketSphinx hears real speech', async (t) => {
  const clock = new ManualClock();
  const scheduler = new Scheduler({ clock, resolutionMs: 0 });
  t.teardown(() => scheduler.close());
  const local = new LocalGatedEngine({ vadGate: true, scheduler, clock });
  t.teardown(() => local.close());
  const { voice } = transcriber(t, [new StreamedVoiceEngine(local, 'pocketsphinx-en-us')], scheduler);
  const result = await voice.transcribe(speech(t, 'Hello world. This is a test of the speech engine.'), 'en');
  t.equal(result.outcome, 'success');
  t.equal(result.stt_provider, 'local');
  t.match(result.transcript, /\w+/);
  t.match(await failure(voice.transcribe(speech(t, 'Bonjour'), 'fr')), { outcome: 'config_error', provider: 'unknown' }, 'English only: French fails closed');
});
