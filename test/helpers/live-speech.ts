// A live session streaming real Opus audio to the recording STT engine, and lines that engine "hears": the driving
// side of the live webhook and proactive notification tests.
import type { TestService } from './service.js';
import { advance, open, type ListenClient } from './listen.js';
import { until } from './until.js';
import type { RecordingSttEngine, RecordingSttStream } from '../fakes/recording-stt.js';
import { OpusEncoderStream } from '../../native/opus.js';
import { frames, sine } from './codec-fixtures.js';
import type { SessionActor } from '../../engine/listen/session-actor.js';

/** A session streaming one second of real Opus audio to the recording engine: its stream, actor and client. */
export async function streaming(ts: TestService, engine: RecordingSttEngine, uid: string): Promise<{ c: ListenClient; actor: SessionActor; stream: RecordingSttStream }> {
  const c = await open(ts, { uid, codec: 'opus', sample_rate: '16000' });
  await c.ready();
  const actor = ts.service.sessions.sessionsOf(uid)[0]!;
  const enc = new OpusEncoderStream(16000);
  const packets = frames(sine(440, 16000, 1, 8000), 320).map((f) => enc.encode(f));
  for (const p of packets) c.ws.send(p);
  await until(() => engine.streams.length > 0 && engine.streams[engine.streams.length - 1]!.samples >= 16000 * 0.98, { what: 'decoded audio at the engine', timeoutMs: 20_000 });
  return { c, actor, stream: engine.streams[engine.streams.length - 1]! };
}

/**
 * Emits one line of `speaker` and runs a step; answers the segment array the device got. With `steps` above 1, steps
 * go on (up to that many) while the device has heard nothing, as they do every 600 ms on a live node: a step that
 * found the store busy is tried again at the next.
 */
export async function say(ts: TestService, c: ListenClient, stream: RecordingSttStream, text: string, speaker: string, start: number, steps = 1): Promise<any[]> {
  stream.emit([{ text, speaker, start, end: start + 0.8 }]);
  for (let step = 1; ; step++) {
    await advance(ts, 600);
    const heard = c.json((m) => Array.isArray(m), steps > 1 ? 2000 : undefined);
    if (step >= steps) return heard;
    const got = await heard.catch(() => undefined);
    if (got !== undefined) return got;
  }
}
