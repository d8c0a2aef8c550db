// The local engine ends utterances as a provider's endpointing does: when the client's audio stops (no frames, or
// keep-alives only) the words come while the socket is open, and continuous speech gives its first words long before
// it ends. Real service, real sockets, espeak-ng speech as opus_fs320; time moves on the service's manual clock.
import t, { type Test } from 'tap';
import { startService, type TestService } from '../../helpers/service.js';
import { advance, open, type ListenClient } from '../../helpers/listen.js';
import { until, waitFor } from '../../helpers/until.js';
import { OpusEncoderStream } from '../../../native/opus.js';
import { frames } from '../../helpers/codec-fixtures.js';
import { concat, silence, speak } from '../../helpers/speech.js';
import { LocalEngine, type LocalStream } from '../../../engine/stt/local/speech.js';
import type { SttEngine } from '../../../engine/stt/types.js';
import type { SessionActor } from '../../../engine/listen/session-actor.js';

const PHRASE = 'the weather is nice today';
// About 21 s of espeak-ng speech whose pauses are all shorter than the speech gate's 700 ms hang-over.
const LONG =
  'The weather is nice today and we are going for a walk in the park. ' +
  'After lunch we will meet our friends near the old bridge, and then we will take the train back home. ' +
  'Tomorrow morning I have a meeting with the design team about the new project. ' +
  'We need to decide on the budget, the schedule and who will write the first report.';

const hasWords = (m: unknown): boolean => Array.isArray(m) && m.some((s: { text?: string }) => (s.text ?? '').trim().length > 0);

function opus(pcm: Int16Array, enc = new OpusEncoderStream(16000)): Uint8Array[] {
  return frames(pcm, 320).map((f) => enc.encode(f));
}

async function session(ts: TestService, uid: string): Promise<{ c: ListenClient; actor: SessionActor }> {
  const c = await open(ts, { uid, codec: 'opus_fs320', sample_rate: '16000', source: 'omi' });
  await c.ready();
  return { c, actor: ts.service.sessions.sessionsOf(uid)[0]! };
}

/** Sends `packets` and waits until their PCM reached the session's speech side (before the clock moves). */
async function send(c: ListenClient, actor: SessionActor, packets: Uint8Array[], samples: number): Promise<void> {
  const before = actor.stats.audioMessages;
  const pcmBefore = actor.stats.pcmSamples;
  for (const p of packets) c.ws.send(p);
  await until(() => actor.stats.audioMessages === before + packets.length, { what: 'every packet received' });
  await until(() => actor.stats.pcmSamples >= pcmBefore + samples - 320, { what: 'the audio decoded' });
}

/**
 * Speech, then the client goes quiet with its socket open: the clock moves in 600 ms steps (sending a keep-alive
 * before each when `keepAlives`) until a segment with words arrives.
 */
async function speechThenQuiet(t: Test, ts: TestService, uid: string, speech: Int16Array, keepAlives: boolean): Promise<void> {
  const what = keepAlives ? 'keep-alive frames only' : 'no frames at all';
  const { c, actor } = await session(ts, uid);
  await send(c, actor, opus(speech), speech.length);
  let open = true;
  void c.closed.then(() => (open = false));
  let clockMs = 0;
  const segments: any[] = await waitFor(
    async () => {
      if (keepAlives) {
        const kept = actor.stats.keepAlives;
        c.ws.send(Buffer.from([0, 0]));
        await until(() => actor.stats.keepAlives === kept + 1, { what: 'keep-alive received' });
      }
      await advance(ts, 600);
      clockMs += 600;
      return c.json(hasWords, 250).catch(() => undefined);
    },
    { what: `words after the audio stopped (${what})`, timeoutMs: 30_000 },
  );
  t.comment(`${what}: "${segments.map((s) => s.text).join(' ')}" after ${clockMs} ms of clock`);
  t.ok(open, 'the socket is still open');
  t.ok(clockMs >= 1000, 'the utterance ended once a second passed without audio');
  t.ok(segments.every((s) => s.stt_provider === 'local' && s.end <= speech.length / 16000 + 0.1), 'local words within the audio');
  if (keepAlives) t.ok(actor.stats.keepAlives >= 2, 'keep-alives kept coming');
  c.close();
  await c.closed;
}

t.test('audio that stops ends the utterance: the words come while the socket is open', async (t) => {
  const speech = concat(silence(0.5), speak(t.testdir(), PHRASE));
  // No sttEngines: the service's default, the local engine behind the speech gate.
  const ts = await startService(t);
  t.test('no frames after the speech', (t) => speechThenQuiet(t, ts, 'u1', speech, false));
  t.test('only keep-alive frames after the speech', (t) => speechThenQuiet(t, ts, 'u2', speech, true));
});

t.test('continuous speech: the first words come long before it ends', async (t) => {
  // The default engine's own class, built on the service's scheduler and clock as the service builds it, so that the
  // test sees how far the speech thread has got and moves the clock only after it did.
  const streams: LocalStream[] = [];
  let engine: LocalEngine | undefined;
  let ts: TestService | undefined;
  const local: SttEngine = {
    name: 'local',
    supports: (language) => language.startsWith('en'),
    async open(opts) {
      engine ??= new LocalEngine({ gate: {}, scheduler: ts!.service.scheduler, clock: ts!.clock });
      const s = await engine.open(opts);
      streams.push(s);
      return s;
    },
    close: async () => engine?.close(),
  };
  ts = await startService(t, { sttEngines: [local] });
  const { c, actor } = await session(ts, 'u3');
  const pcm = speak(t.testdir(), LONG);
  const totalS = pcm.length / 16000;
  t.ok(totalS > 18, `${totalS.toFixed(1)} s of speech`);

  // 600 ms of audio per step of the clock, as a device streams it; the clock moves once the thread has gated it.
  const step = 9600;
  const enc = new OpusEncoderStream(16000);
  let firstAtS: number | undefined;
  for (let at = 0; at < pcm.length && firstAtS === undefined; at += step) {
    const part = pcm.subarray(at, Math.min(at + step, pcm.length));
    await send(c, actor, opus(part, enc), part.length);
    const sent = Math.min(at + step, pcm.length) - 320;
    await until(() => (streams[0]?.gate?.inSamples ?? 0) >= sent - 512, { what: 'the speech thread took the audio', timeoutMs: 30_000 });
    await advance(ts, 600);
    if (await c.json(hasWords, 250).catch(() => undefined)) firstAtS = (at + part.length) / 16000;
  }
  t.comment(`first words at ${firstAtS?.toFixed(1)} s of ${totalS.toFixed(1)} s of speech`);
  t.ok(firstAtS !== undefined && firstAtS <= 9, 'the first words came within 9 s of speech');
  c.close();
  await c.closed;
});
