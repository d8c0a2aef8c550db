// A session's speaker identification on its own, with a codec window that answers when told: which audio a clip
// takes, the bound on speakers waiting, and the clip a confirmed person's sample is made of.
import t from 'tap';
import { SpeakerIdentification, MAX_PENDING, CLIPS_AT_ONCE, clipRanges, type SpeakerIdOptions } from '../../../engine/listen/speaker-id.js';
import { Slots } from '../../../engine/runtime/slots.js';
import { SpeakerAssignments } from '../../../engine/audio/speakers.js';
import { createLogger } from '../../../engine/logger.js';
import type { RawSegment } from '../../../engine/audio/buffer-loop.js';

t.test('a clip is the speaker’s latest audio up to 10 s, or the centre of a longer segment', async (t) => {
  t.same(clipRanges([]), []);
  t.same(clipRanges([[1, 3]]), [1, 3]);
  t.same(clipRanges([[0, 4], [5, 9], [10, 13]]), [1, 4, 5, 9, 10, 13], 'back to 10 s, the oldest span trimmed');
  t.same(clipRanges([[0, 4], [20, 36]]), [23, 33], 'a 16 s segment gives its middle 10 s');
});

/** A session's parts as fakes: clips wait until released; every call is recorded. */
function harness(clipSlots?: Slots): { ident: SpeakerIdentification; clips: number[][]; release: () => void; samples: unknown[]; drops: () => number; embedded: () => number } {
  const clips: number[][] = [];
  const waiting: (() => void)[] = [];
  const samples: unknown[] = [];
  let drops = 0;
  let embedded = 0;
  const unit = Float32Array.of(1, 0, 0);
  const o: SpeakerIdOptions = {
    uid: 'u1',
    sessionId: 's1',
    logger: createLogger('silent'),
    voiceprints: {
      getProfile: async () => ({ embedding: Float32Array.of(0, 1, 0), model: 'm', speechSeconds: 10, updatedAt: new Date() }),
      listPeopleEmbeddings: async () => [],
      findPersonByName: async () => null,
      createPerson: async (_uid, name) => ({ id: `p-${name}`, name }),
      addPersonSample: async (_uid, personId, sample) => (samples.push({ personId, samples: sample.pcm.length, segmentId: sample.segmentId }), { sampleId: 'x' }),
    },
    embeddings: () => ({ model: 'm', dimension: 3, embed: async () => (embedded++, unit), close: async () => undefined }),
    metrics: { embedded: () => undefined, matched: () => undefined, dropped: () => drops++, sampled: () => undefined },
    ...(clipSlots ? { clipSlots } : {}),
    codec: {
      window: async () => undefined,
      clip: (ranges) => {
        clips.push([...ranges]);
        let seconds = 0;
        for (let i = 0; i < ranges.length; i += 2) seconds += ranges[i + 1]! - ranges[i]!;
        return new Promise((resolve) => waiting.push(() => resolve(new Int16Array(Math.round(seconds * 16000)))));
      },
    },
    speakers: new SpeakerAssignments(),
    loop: { reassignSpeaker: () => undefined, lastSegmentOf: () => undefined, conversationId: 'c1' },
    send: () => undefined,
  };
  const ident = new SpeakerIdentification(o);
  return { ident, clips, release: () => waiting.shift()?.(), samples, drops: () => drops, embedded: () => embedded };
}

const seg = (speaker: number, start: number, end: number): RawSegment => ({ text: 'words here', speaker: `SPEAKER_${String(speaker).padStart(2, '0')}`, start, end, sttProvider: 'p' });
/** Lets the promise chains the last release started run out. */
const settle = async (): Promise<void> => {
  for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
};

t.test('one clip at a time; speakers beyond the queue are dropped and counted, then tried again', async (t) => {
  const h = harness();
  await h.ident.load();
  t.equal(h.ident.state, 'on');
  h.ident.segments([seg(0, 0, 1.5)]);
  t.equal(h.clips.length, 0, 'under 2 s: nothing yet');
  h.ident.segments([seg(0, 1.6, 2.4)]);
  t.same(h.clips, [[0, 1.5, 1.6, 2.4]], "2 s of the speaker's audio: its clip is asked for");
  // Speaker 0's clip is in flight; MAX_PENDING more speakers queue, the next is dropped.
  for (let s = 1; s <= MAX_PENDING + 1; s++) h.ident.segments([seg(s, 10 * s, 10 * s + 2)]);
  t.equal(h.drops(), 1, 'one speaker found the queue full');
  t.equal(h.clips.length, 1, 'still one clip in flight');
  for (let i = 0; i < MAX_PENDING + 1; i++) {
    h.release();
    await settle();
  }
  t.equal(h.embedded(), MAX_PENDING + 1, 'the first and every queued speaker were embedded, one after the other');
  h.ident.segments([seg(MAX_PENDING + 1, 100, 102)]);
  h.release();
  await settle();
  await settle();
  t.equal(h.embedded(), MAX_PENDING + 2, 'the dropped speaker is tried with its next segment');
});

t.test('a confirmed person: the speaker’s clip becomes a sample; "user" adds none', async (t) => {
  const h = harness();
  await h.ident.load();
  h.ident.segments([seg(1, 0, 3)]);
  h.release();
  await settle();
  h.ident.assigned({ speakerId: 2, personId: 'user', personName: 'Me', segmentIds: [] });
  h.ident.assigned({ speakerId: 1, personId: 'p-ana', personName: 'Ana', segmentIds: ['a', 'b'] });
  t.same(h.clips.at(-1), [0, 3], 'the clip of speaker 1');
  h.release();
  await settle();
  await settle();
  t.same(h.samples, [{ personId: 'p-ana', samples: 48000, segmentId: 'b' }]);
});

t.test('sessions that start together cut their clips a few at a time: the node holds at most CLIPS_AT_ONCE', async (t) => {
  const slots = new Slots(CLIPS_AT_ONCE);
  const sessions = [harness(slots), harness(slots), harness(slots), harness(slots)];
  for (const h of sessions) await h.ident.load();
  for (const h of sessions) h.ident.segments([seg(0, 0, 2.5)]);
  await settle();
  const asked = (): number => sessions.reduce((n, h) => n + h.clips.length, 0);
  t.equal(asked(), CLIPS_AT_ONCE, `${CLIPS_AT_ONCE} clips cut, the other sessions wait for a slot`);
  sessions[0]!.release();
  await settle();
  t.equal(asked(), CLIPS_AT_ONCE + 1, 'one embedded: the next session cuts its clip');
  for (const h of sessions) h.release();
  await settle();
  for (const h of sessions) h.release();
  await settle();
  t.equal(asked(), sessions.length, 'every session had its clip');
  t.same(sessions.map((h) => h.embedded()), [1, 1, 1, 1], 'and every one was embedded');
});
