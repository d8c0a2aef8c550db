// A session's speech side keeps what a remote provider never answered for: encoded while it streams, decoded again
// when the provider fails, cut to exactly the unanswered samples and placed at their stream time.
import t, { type Test } from 'tap';
import { SessionStt, type SessionCodec } from '../../../engine/listen/session-stt.js';
import type { EncodedTail } from '../../../engine/audio/encoded-tail.js';
import { ManualClock } from '../../../engine/clock.js';
import { createLogger } from '../../../engine/logger.js';
import { Scheduler } from '../../../engine/scheduler.js';
import { EngineList } from '../../../engine/stt/engine-list.js';
import type { KeptAudioMeta } from '../../../engine/stt/kept-audio.js';
import { RecordingSttEngine, type RecordingSttStream } from '../../fakes/recording-stt.js';
import { concat } from '../../helpers/codec-fixtures.js';

const RATE = 16000;
/** Sample i is i mod 30000: every stretch of the stream is recognisable. */
const ramp = (from: number, n: number): Int16Array => new Int16Array(n).map((_, i) => (from + i) % 30000);

async function setup(t: Test, opts: { maxKeptS?: number; channels?: 1 | 2 } = {}) {
  const engine = new RecordingSttEngine('remote');
  const scheduler = new Scheduler({ clock: new ManualClock(), resolutionMs: 0 });
  t.teardown(() => scheduler.close());
  const decodes: number[] = [];
  const channels = opts.channels ?? 1;
  // The session's codec stream keeps each message in its channel's tail as it leaves for the decoder.
  let tails: readonly EncodedTail[] | undefined;
  const codec: SessionCodec = {
    socket: () => {
      throw new Error('the recording engine opens no socket');
    },
    keepEncoded: (given) => void (tails = given),
  };
  /** One message as the codec stream keeps it: pcm16 "encoded" is the samples themselves. */
  const retain = (channel: number, pcm: Int16Array): void => tails?.[channel]?.push(new Uint8Array(pcm.slice().buffer), pcm.length / RATE);
  const stt = new SessionStt({
    registry: new EngineList([engine]), language: 'en', sttService: null, channels, sessionId: 's1', scheduler, logger: createLogger('silent'),
    codec,
    // Decoding pcm16 reads the samples back.
    decodeKept: async (ms) => (decodes.push(ms.length), concat(ms.map((m) => new Int16Array(m.slice().buffer)))),
    ...(opts.maxKeptS !== undefined ? { maxKeptS: opts.maxKeptS } : {}),
    onSegments: () => undefined,
    onFailure: () => undefined,
  });
  t.equal(await stt.open(new AbortController().signal), 'ok');
  /** Streams `seconds` more on `channel` as the session would: each 20 ms message kept, then its PCM written. */
  const at = [0, 0];
  const stream = (seconds: number, channel = 0): void => {
    for (let n = 0; n < seconds * 50; n++) {
      const pcm = ramp(at[channel]!, 320);
      retain(channel, pcm);
      stt.write(channel, pcm);
      at[channel]! += 320;
    }
  };
  const kept: { meta: KeptAudioMeta; pcm: Int16Array }[] = [];
  const keep = () => stt.keep(async () => ({ conversationId: 'c1', offsetS: 10 }), async (meta, chunks) => void kept.push({ meta, pcm: concat([...chunks]) }), { uid: 'u1', sessionId: 's1', createdAtMs: 0 });
  return { live: engine.streams as RecordingSttStream[], stt, stream, retain, decodes, kept, keep, tails: () => tails };
}

t.test('only the audio after the last final is kept, decoded again from a little before it, exactly', async (t) => {
  const { live, stream, decodes, kept, keep } = await setup(t);
  stream(2);
  live[0]!.acknowledged = 1.5 * RATE; // the provider's finals reached 1.5 s
  stream(1);
  live[0]!.fail({ outcome: 'upstream_error', retryable: true, reason: 'connection_lost' });
  stream(0.1); // PCM still coming out of the decoder after the failure goes to the kept audio too
  t.equal(await keep(), 1.6, 'seconds kept');
  t.equal(kept.length, 1);
  t.equal(kept[0]!.meta.offsetS, 10 + 1.5, 'placed at 1.5 s of the stream');
  t.same(kept[0]!.pcm, ramp(1.5 * RATE, 1.6 * RATE), 'the samples from 1.5 s on, none twice, none missing');
  t.equal(decodes.length, 1);
  t.ok(decodes[0]! <= 1.5 * 50 + 3 + 1, `only the unanswered tail and the warm-up were kept encoded (${decodes[0]} messages)`);
});

t.test('a provider that never answers: the bound drops the oldest audio, and what is kept starts where it begins', async (t) => {
  const { live, stream, kept, keep } = await setup(t, { maxKeptS: 0.5 });
  stream(3);
  live[0]!.fail({ outcome: 'upstream_error', retryable: true, reason: 'connection_lost' });
  t.equal(await keep(), 0.5);
  t.equal(kept[0]!.meta.offsetS, 10 + 2.5, 'the last half second');
  t.same(kept[0]!.pcm, ramp(2.5 * RATE, 0.5 * RATE));
});

t.test('audio that left for the decoder after the failure and went out on the failed socket is replayed too, whatever the bound', async (t) => {
  const { live, stt, stream, retain, kept, keep, tails } = await setup(t, { maxKeptS: 1 });
  stream(2);
  live[0]!.acknowledged = 1.5 * RATE;
  stream(0.02);
  live[0]!.fail({ outcome: 'upstream_error', retryable: true, reason: 'connection_lost' });
  // A codec shard holding the socket sent this PCM before it knew: the session is told only the count (uplinked).
  for (let n = 0; n < 100; n++) {
    retain(0, ramp(2.02 * RATE + n * 320, 320));
    stt.uplinked(0, 320);
  }
  t.equal(await keep(), 2.52, 'seconds kept: from the last final to the last sample sent');
  t.equal(tails(), undefined, 'the codec stream was told to stop keeping once the tails were read');
  t.equal(kept[0]!.meta.offsetS, 10 + 1.5);
  t.same(kept[0]!.pcm, ramp(1.5 * RATE, 2.52 * RATE), 'every sample from 1.5 s on, though more than the 1 s bound came after it');
});

t.test('two channels are kept apart, each from its own last final', async (t) => {
  const { live, stream, kept, keep } = await setup(t, { channels: 2 });
  stream(2, 0);
  stream(2, 1);
  live[0]!.acknowledged = 1 * RATE;
  live[1]!.acknowledged = 1.8 * RATE;
  stream(0.02, 0); // a write lets each channel drop what its finals cover
  stream(0.02, 1);
  live[1]!.fail({ outcome: 'upstream_error', retryable: true, reason: 'connection_lost' });
  t.equal(await keep(), 1.02 + 0.22);
  const byChannel = Object.fromEntries(kept.map((k) => [k.meta.channel, k]));
  t.equal(byChannel[0]!.meta.offsetS, 11);
  t.same(byChannel[0]!.pcm, ramp(1 * RATE, 1.02 * RATE));
  t.equal(byChannel[1]!.meta.offsetS, 11.8);
  t.same(byChannel[1]!.pcm, ramp(1.8 * RATE, 0.22 * RATE));
});
