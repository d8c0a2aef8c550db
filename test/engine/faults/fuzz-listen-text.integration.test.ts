// Malformed text messages on /v4/listen (random text, JSON of every shape, known message types with wrong or missing
// fields, messages just over the 64 KiB limit): a message within the limit never ends the session, one over it closes
// 1009; the 600 ms steps that follow store what was valid, and the process stays up.
import t from 'tap';
import fc from 'fast-check';
import { startService } from '../../helpers/service.js';
import { advance, open, type ListenClient } from '../../helpers/listen.js';
import { until } from '../../helpers/until.js';
import { check } from '../../helpers/fuzz.js';
import type { SessionActor } from '../../../engine/listen/session-actor.js';

const RUNS = 2900;
const LIMIT = 64 * 1024;
const ts = await startService(t, { env: { RATE_LIMIT_PER_MINUTE: '10000000' } });

const TYPES = ['suggested_transcript', 'speaker_assigned', 'image_chunk', 'ping', 'end_recording', ''];
const junk = fc.anything({ maxDepth: 3, withNullPrototype: false, withBigInt: false, withMap: false, withSet: false, withBoxedValues: false, withTypedArray: false, withSparseArray: false });
const segment = fc.record({ text: fc.oneof(fc.string(), junk), speaker: fc.oneof(fc.constant('SPEAKER_00'), junk), speaker_id: fc.oneof(fc.integer(), junk), is_user: fc.oneof(fc.boolean(), junk), person_id: fc.oneof(fc.constant(null), fc.string()), start: fc.oneof(fc.double(), junk), end: fc.oneof(fc.double(), junk) }, { requiredKeys: [] });
const typed = fc.oneof(
  fc.record({ type: fc.constant('suggested_transcript'), stt_provider: fc.oneof(fc.string(), junk), segments: fc.oneof(fc.array(segment, { maxLength: 5 }), junk) }, { requiredKeys: ['type'] }),
  fc.record({ type: fc.constant('speaker_assigned'), speaker_id: fc.oneof(fc.integer(), junk), person_id: fc.oneof(fc.string(), junk), person_name: fc.oneof(fc.string(), junk), segment_ids: fc.oneof(fc.array(fc.string(), { maxLength: 5 }), junk) }, { requiredKeys: ['type'] }),
  fc.record({ type: fc.constant('image_chunk'), id: fc.oneof(fc.string({ maxLength: 200 }), junk), index: fc.oneof(fc.integer({ min: -2, max: 1002 }), junk), total: fc.oneof(fc.integer({ min: -2, max: 1002 }), junk), data: fc.oneof(fc.base64String({ maxLength: 400 }), junk) }, { requiredKeys: ['type'] }),
  fc.record({ type: fc.oneof(fc.constantFrom(...TYPES), fc.string(), junk) }).chain((base) => fc.dictionary(fc.string({ maxLength: 12 }), junk, { maxKeys: 5 }).map((rest) => ({ ...rest, ...base }))),
);
const message = fc.oneof(
  { arbitrary: typed.map((m) => JSON.stringify(m)), weight: 18 },
  { arbitrary: junk.map((v) => JSON.stringify(v) ?? 'undefined'), weight: 6 },
  { arbitrary: fc.string({ unit: 'binary', maxLength: 300 }), weight: 6 },
  // A valid message with characters dropped or swapped: JSON that breaks anywhere.
  { arbitrary: fc.tuple(typed.map((m) => JSON.stringify(m)), fc.nat(), fc.nat()).map(([s, a, b]) => s.slice(0, a % (s.length + 1)) + s.slice((a % (s.length + 1)) + (b % 3))), weight: 6 },
  // Just under and just over the limit.
  { arbitrary: fc.integer({ min: LIMIT - 64, max: LIMIT + 64 }).map((n) => JSON.stringify({ type: 'image_chunk', id: 'x', index: 0, total: 1, data: 'A'.repeat(n) }).slice(0, n)), weight: 1 },
);

t.test(`${RUNS} malformed text messages: the session ends only for one over 64 KiB, with 1009`, async (t) => {
  let c: ListenClient;
  let actor: SessionActor;
  let sessions = 0;
  const connect = async (): Promise<void> => {
    const uid = `fuzz-text-${sessions++}`;
    c = await open(ts, { uid, custom_stt: 'enabled' });
    await c.ready();
    actor = ts.service.sessions.sessionsOf(uid)[0]!;
  };
  await connect();
  let runs = 0;
  await check(t, 'listen text messages', fc.asyncProperty(message, async (text) => {
    const bytes = Buffer.byteLength(text);
    const seen = actor.stats.textMessages;
    c.ws.send(text);
    if (bytes > LIMIT) {
      const closed = await c.closed;
      await connect();
      return closed.code === 1009 && closed.reason === `message too big: ${bytes} bytes, at most ${LIMIT}`;
    }
    await until(() => actor.stats.textMessages > seen || c.ws.readyState !== c.ws.OPEN, { what: 'the message taken' });
    // A 600 ms step now and then: what the junk left in the transcript loop is stored or dropped, never thrown.
    if (++runs % 50 === 0) await advance(ts, 600);
    return c.ws.readyState === c.ws.OPEN && actor.state !== 'closed';
  }), RUNS);
  await advance(ts, 600);
  t.equal(c!.ws.readyState, c!.ws.OPEN, 'the last session is open');
  t.equal((await ts.req('/health')).status, 200, 'the node is alive');
  c!.close();
  await c!.closed;
});
