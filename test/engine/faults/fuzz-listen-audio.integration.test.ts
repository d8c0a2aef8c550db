// Malformed binary frames on /v4/listen for every codec (random bytes, damaged and truncated real frames): each is
// taken as audio or a keep-alive and never ends the session; the codec threads and the process survive, and a real
// frame sent after the junk still decodes.
import t from 'tap';
import fc from 'fast-check';
import { startService } from '../../helpers/service.js';
import { open, type ListenClient } from '../../helpers/listen.js';
import { until } from '../../helpers/until.js';
import { check, damaged } from '../../helpers/fuzz.js';
import { aacAdts, frames, pcmMessages, sine } from '../../helpers/codec-fixtures.js';
import { Lc3Encoder } from '../../../native/index.js';
import { OpusEncoderStream } from '../../../native/opus.js';
import { NullSttEngine } from '../../../engine/stt/null.js';
import type { SessionActor } from '../../../engine/listen/session-actor.js';

const RUNS_PER_CODEC = 300;
const dir = t.testdir();
const tone = (rate: number): Int16Array => sine(440, rate, 0.2, 8000);
const opus = (rate: number, samples: number): Uint8Array[] => {
  const enc = new OpusEncoderStream(rate);
  return frames(tone(rate), samples).map((f) => enc.encode(f));
};
const lc3 = (bytes: number): Uint8Array[] => frames(tone(16000), 160).map((f) => new Lc3Encoder(10000, 16000).encode(f, bytes));
const CODECS: { codec: string; valid: Uint8Array[] }[] = [
  { codec: 'pcm8', valid: pcmMessages(tone(8000), 160) },
  { codec: 'pcm16', valid: pcmMessages(tone(16000), 320) },
  { codec: 'opus', valid: opus(16000, 160) },
  { codec: 'opus_fs320', valid: opus(16000, 320) },
  { codec: 'aac', valid: aacAdts(dir, tone(16000), 16000) },
  { codec: 'lc3', valid: lc3(40) },
  { codec: 'lc3_fs1030', valid: lc3(30) },
];
const SAMPLE_RATE: Record<string, string> = { pcm8: '8000' };

const ts = await startService(t, { sttEngines: [new NullSttEngine()], env: { VAD_GATE: 'off', CODEC_THREADS: '1' }, tuning: { inlineBusyPct: 0 } });

for (const { codec, valid } of CODECS) {
  t.test(`${codec}: ${RUNS_PER_CODEC} malformed frames never end the session`, async (t) => {
    const uid = `fuzz-${codec}`;
    const c: ListenClient = await open(ts, { uid, codec, sample_rate: SAMPLE_RATE[codec] ?? '16000' });
    await c.ready();
    const actor: SessionActor = ts.service.sessions.sessionsOf(uid)[0]!;
    const frame = fc.oneof({ arbitrary: damaged(valid), weight: 3 }, { arbitrary: fc.uint8Array({ maxLength: 4000 }), weight: 2 }, { arbitrary: fc.constantFrom(...valid), weight: 1 });
    await check(t, `${codec} frames`, fc.asyncProperty(frame, async (bytes) => {
      const taken = actor.stats.audioMessages + actor.stats.keepAlives;
      c.ws.send(bytes);
      await until(() => actor.stats.audioMessages + actor.stats.keepAlives > taken || c.ws.readyState !== c.ws.OPEN, { what: 'the frame taken' });
      return c.ws.readyState === c.ws.OPEN && actor.state !== 'closed';
    }), RUNS_PER_CODEC);
    // Decoding is behind the socket: a real frame after the junk still comes out as PCM.
    const before = actor.stats.pcmSamples;
    for (const v of valid) c.ws.send(v);
    await until(() => actor.stats.pcmSamples > before, { what: 'PCM after the junk', timeoutMs: 30_000 });
    t.equal(c.ws.readyState, c.ws.OPEN, 'the session is open');
    c.close();
    t.same(await c.closed, { code: 1000, reason: '' });
  });
}

t.test('the node is alive after every codec took its junk', async (t) => {
  t.equal((await ts.req('/health')).status, 200);
});
