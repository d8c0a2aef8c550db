// combineSegments / mergeBatch: the compatible system's merge rules, table-driven after its 22 conformance cases.
import t from 'tap';
import { combineSegments, mergeBatch } from '../../../engine/audio/segments.js';
import { speakerIdOf, type TranscriptSegment } from '../../../engine/audio/segment.js';

let counter = 0;
function seg(text: string, speaker = 'SPEAKER_00', start = 0, end = 1, extra: Partial<TranscriptSegment> = {}): TranscriptSegment {
  counter += 1;
  return {
    id: `seg-${counter}`,
    text,
    speaker,
    speakerId: speakerIdOf(speaker),
    isUser: false,
    personId: null,
    start,
    end,
    speechProfileProcessed: true,
    sttProvider: 'provider_a',
    ...extra,
  };
}

/** Words are never lost or reordered by a merge, only regrouped (modulo the punctuation clean-up). */
function concat(texts: string[]): string {
  return texts.map((x) => x.trim()).filter((x) => x !== '').join(' ');
}

interface Expect {
  /** [speaker, text] of every resulting segment, in order; text may be a RegExp. */
  segments: [string, string | RegExp][];
  /** Indexes into `existing ++ incoming` whose ids must be the result ids, in order. */
  ids?: number[];
  updated?: number;
  /** Indexes into `existing` of stored segments reported removed. */
  removed?: number[];
  /** Skip the words-preserved check (the clean-up changes spacing). */
  cleaned?: boolean;
}

interface Case {
  name: string;
  existing?: TranscriptSegment[];
  incoming: TranscriptSegment[];
  expect: Expect;
}

const LONG_A =
  "Then I don't at the same time, we only have so many hours in the day, so people need to prioritize what they're gonna learn. " +
  "It may be that, okay, a world with perfect translation, which the way, we basically just announced on the Ray Ban Meta is that now you're gonna be able to";

const cases: Case[] = [
  {
    name: 'forward move of a short unfinished last sentence',
    incoming: [seg('Hello there. and then', 'SPEAKER_00', 0, 4), seg('we continue speaking.', 'SPEAKER_01', 4, 7)],
    expect: { segments: [['SPEAKER_00', 'Hello there.'], ['SPEAKER_01', 'and then we continue speaking.']], ids: [0, 1], updated: 2, removed: [] },
  },
  {
    name: 'no move when the next segment starts a new sentence',
    incoming: [seg('and then we continue speaking', 'SPEAKER_00', 0, 3), seg('Ok.', 'SPEAKER_01', 3, 4)],
    expect: { segments: [['SPEAKER_00', 'and then we continue speaking'], ['SPEAKER_01', 'Ok.']], ids: [0, 1], updated: 2 },
  },
  {
    name: 'same speaker, small gap: merged',
    incoming: [seg('Hello', 'SPEAKER_00', 0, 1), seg('world.', 'SPEAKER_00', 1.1, 2)],
    expect: { segments: [['SPEAKER_00', 'Hello world.']], ids: [0], updated: 1 },
  },
  {
    name: 'merge into the stored tail keeps its id and reports it updated',
    existing: [seg('Hello', 'SPEAKER_00', 0, 1)],
    incoming: [seg('world.', 'SPEAKER_00', 1.1, 2)],
    expect: { segments: [['SPEAKER_00', 'Hello world.']], ids: [0], updated: 1, removed: [] },
  },
  {
    name: 'forward move trims the completed prefix',
    incoming: [seg('First sentence. trailing', 'SPEAKER_00', 0, 4), seg('continue here.', 'SPEAKER_01', 4, 6)],
    expect: { segments: [['SPEAKER_00', 'First sentence.'], ['SPEAKER_01', 'trailing continue here.']], updated: 2, removed: [] },
  },
  {
    name: 'forward move keeps the prefix (longer next sentence)',
    incoming: [seg('First sentence. trailing', 'SPEAKER_00', 0, 4), seg('continues here with more.', 'SPEAKER_01', 4, 6)],
    expect: { segments: [['SPEAKER_00', 'First sentence.'], ['SPEAKER_01', 'trailing continues here with more.']], updated: 2 },
  },
  {
    name: 'forward move empties a new segment: dropped, not reported removed',
    incoming: [seg('unfinished', 'SPEAKER_00', 0, 2), seg('continues now.', 'SPEAKER_01', 2, 4)],
    expect: { segments: [['SPEAKER_01', 'unfinished continues now.']], ids: [1], updated: 1, removed: [] },
  },
  {
    name: 'forward move empties the stored tail: removed id reported',
    existing: [seg("we're", 'SPEAKER_02', 0, 1)],
    incoming: [seg("we're struggling to connect.", 'SPEAKER_01', 1.2, 3)],
    expect: { segments: [['SPEAKER_01', "we're we're struggling to connect."]], ids: [1], updated: 1, removed: [0] },
  },
  {
    name: 'forward move empties the stored tail (longer next)',
    existing: [seg('unfinished', 'SPEAKER_00', 0, 1)],
    incoming: [seg('unfinished but continues here.', 'SPEAKER_01', 1.1, 3)],
    expect: { segments: [['SPEAKER_01', 'unfinished unfinished but continues here.']], ids: [1], updated: 1, removed: [0] },
  },
  {
    name: 'lowercase continuation does not cross speakers (equal fragments: nothing moves)',
    incoming: [seg('hello', 'SPEAKER_00', 0, 1), seg('world', 'SPEAKER_01', 1.2, 2)],
    expect: { segments: [['SPEAKER_00', 'hello'], ['SPEAKER_01', 'world']], ids: [0, 1], updated: 2 },
  },
  {
    name: 'backward move of the first sentence of the next segment',
    incoming: [
      seg('There are so many versions of trying to get a similar idea of digital objects in physical space', 'SPEAKER_02', 0, 2),
      seg('move. Mhmm.', 'SPEAKER_01', 2, 2.5),
    ],
    expect: { segments: [['SPEAKER_02', /space move\.$/], ['SPEAKER_01', 'Mhmm.']], ids: [0, 1], updated: 2, removed: [] },
  },
  {
    name: 'backward move keeps the next segment when sentences remain',
    incoming: [seg('This is an incomplete thought', 'SPEAKER_00', 0, 2), seg('continued here. Another sentence stays.', 'SPEAKER_01', 2, 4)],
    expect: { segments: [['SPEAKER_00', 'This is an incomplete thought continued here.'], ['SPEAKER_01', 'Another sentence stays.']], updated: 2 },
  },
  {
    name: 'backward move empties the next segment',
    incoming: [
      seg('Maybe it\'s a 20 degree or 30 degree field of view and we read faster than we can', 'SPEAKER_01', 0, 2),
      seg('listen.', 'SPEAKER_02', 2, 2.2),
    ],
    expect: { segments: [['SPEAKER_01', /we can listen\.$/]], ids: [0], updated: 1, removed: [] },
  },
  {
    name: 'same speaker lowercase continuation merged',
    incoming: [seg('Hello', 'SPEAKER_00', 0, 1), seg('world', 'SPEAKER_00', 1.1, 2)],
    expect: { segments: [['SPEAKER_00', 'Hello world']], ids: [0], updated: 1 },
  },
  {
    name: 'a phrase between two runs of one speaker moves back, then the runs join',
    incoming: [
      seg(LONG_A, 'SPEAKER_1', 0, 2),
      seg('just, like, go to different countries', 'SPEAKER_2', 2.1, 2.5),
      seg("we're starting out. We're we're starting out with just a few languages, but we'll roll it out to more.", 'SPEAKER_1', 2.5, 3.5),
    ],
    expect: { segments: [['SPEAKER_1', /able to just, like, go to different countries we're starting out\./]], ids: [0], updated: 1 },
  },
  {
    name: 'a short lowercase phrase at a speaker change moves back',
    incoming: [
      seg('Like, for example, you mentioned automatic real time translation. Mhmm. Like, basically, the Star Trek translator. Yeah. Universal translator. Think they were', 'SPEAKER_3', 0, 2),
      seg('pretty much', 'SPEAKER_1', 2, 2.5),
    ],
    expect: { segments: [['SPEAKER_3', /Think they were pretty much$/]], ids: [0], updated: 1 },
  },
  {
    name: 'finished sentences of different speakers stay apart',
    incoming: [seg('Hello.', 'SPEAKER_00', 0, 1), seg('Hi.', 'SPEAKER_01', 1.1, 2)],
    expect: { segments: [['SPEAKER_00', 'Hello.'], ['SPEAKER_01', 'Hi.']], ids: [0, 1], updated: 2, removed: [] },
  },
  {
    name: 'never merged across stt providers',
    incoming: [seg('Hello', 'SPEAKER_00', 0, 1, { sttProvider: 'provider_a' }), seg('world.', 'SPEAKER_00', 1.1, 2, { sttProvider: 'provider_b' })],
    expect: { segments: [['SPEAKER_00', 'Hello'], ['SPEAKER_00', 'world.']], ids: [0, 1], updated: 2 },
  },
  {
    name: 'no fragment moves across stt providers either',
    incoming: [seg('Hello there. and then', 'SPEAKER_00', 0, 4, { sttProvider: 'provider_a' }), seg('we continue speaking.', 'SPEAKER_01', 4, 7, { sttProvider: null })],
    expect: { segments: [['SPEAKER_00', 'Hello there. and then'], ['SPEAKER_01', 'we continue speaking.']], ids: [0, 1] },
  },
  {
    name: 'punctuation clean-up',
    incoming: [seg('Hello , world  is  here ?  Yes .', 'SPEAKER_00', 0, 1)],
    expect: { segments: [['SPEAKER_00', 'Hello, world is here? Yes.']], updated: 1, cleaned: true },
  },
  {
    name: 'a blank segment merges away without breaking the text',
    incoming: [seg('Hello', 'SPEAKER_00', 0, 1), seg('   ', 'SPEAKER_00', 1.1, 2)],
    expect: { segments: [['SPEAKER_00', 'Hello']], ids: [0], updated: 1 },
  },
  {
    name: 'text without case merges for the same speaker',
    incoming: [seg('こんにちは', 'SPEAKER_00', 0, 1), seg('世界。', 'SPEAKER_00', 1.1, 2)],
    expect: { segments: [['SPEAKER_00', 'こんにちは 世界。']], ids: [0], updated: 1 },
  },
  {
    name: 'gap of 3 s or more splits a same-speaker run',
    incoming: [seg('Hello there.', 'SPEAKER_00', 0, 1), seg('Next thought.', 'SPEAKER_00', 4, 5)],
    expect: { segments: [['SPEAKER_00', 'Hello there.'], ['SPEAKER_00', 'Next thought.']], ids: [0, 1] },
  },
  {
    name: 'gap just under 3 s still merges',
    incoming: [seg('Hello there.', 'SPEAKER_00', 0, 1), seg('Next thought.', 'SPEAKER_00', 3.99, 5)],
    expect: { segments: [['SPEAKER_00', 'Hello there. Next thought.']], ids: [0] },
  },
  {
    name: 'a long finished text closes its segment',
    incoming: [seg(`${'word '.repeat(25)}end.`, 'SPEAKER_00', 0, 5), seg('Another one.', 'SPEAKER_00', 5.1, 6)],
    expect: { segments: [['SPEAKER_00', /end\.$/], ['SPEAKER_00', 'Another one.']], ids: [0, 1] },
  },
  {
    name: 'a long unfinished text keeps merging',
    incoming: [seg(`${'word '.repeat(25)}and`, 'SPEAKER_00', 0, 5), seg('Another one.', 'SPEAKER_00', 5.1, 6)],
    expect: { segments: [['SPEAKER_00', /and Another one\.$/]], ids: [0] },
  },
  {
    name: 'lowercase continuation joins the same speaker even after a long gap',
    incoming: [seg(`${'word '.repeat(25)}and`, 'SPEAKER_00', 0, 5), seg('then it went on.', 'SPEAKER_00', 20, 21)],
    expect: { segments: [['SPEAKER_00', /and then it went on\.$/]], ids: [0] },
  },
  {
    name: 'speech-profile boundary splits a same-speaker run',
    incoming: [seg('Before the profile', 'SPEAKER_00', 0, 1, { speechProfileProcessed: false }), seg('After the profile.', 'SPEAKER_00', 1.1, 2)],
    expect: { segments: [['SPEAKER_00', 'Before the profile'], ['SPEAKER_00', 'After the profile.']], ids: [0, 1] },
  },
  {
    name: 'two user segments merge despite different labels',
    incoming: [seg('I think', 'SPEAKER_00', 0, 1, { isUser: true }), seg('So.', 'SPEAKER_03', 1.2, 2, { isUser: true })],
    expect: { segments: [['SPEAKER_00', 'I think So.']], ids: [0] },
  },
  {
    name: 'an unchanged stored tail is not reported updated',
    existing: [seg('Earlier.', 'SPEAKER_01', 0, 1), seg('Hello.', 'SPEAKER_00', 1, 2)],
    incoming: [seg('Hi.', 'SPEAKER_01', 2.1, 3)],
    expect: { segments: [['SPEAKER_01', 'Earlier.'], ['SPEAKER_00', 'Hello.'], ['SPEAKER_01', 'Hi.']], ids: [0, 1, 2], updated: 1, removed: [] },
  },
  {
    name: 'the batch is merged among itself before it meets the stored tail',
    existing: [seg('We went', 'SPEAKER_00', 0, 1)],
    incoming: [seg('to the', 'SPEAKER_00', 1.1, 1.5), seg('park.', 'SPEAKER_00', 1.6, 2), seg('Nice.', 'SPEAKER_01', 2.5, 3)],
    expect: { segments: [['SPEAKER_00', 'We went to the park.'], ['SPEAKER_01', 'Nice.']], ids: [0, 3], updated: 2, removed: [] },
  },
  {
    name: 'empty incoming leaves the transcript as it is',
    existing: [seg('Hello.', 'SPEAKER_00', 0, 1)],
    incoming: [],
    expect: { segments: [['SPEAKER_00', 'Hello.']], ids: [0], updated: 0, removed: [] },
  },
  {
    name: 'empty existing and incoming',
    incoming: [],
    expect: { segments: [], updated: 0, removed: [] },
  },
];

for (const c of cases) {
  t.test(c.name, async (t) => {
    const existing = c.existing ?? [];
    const all = [...existing, ...c.incoming];
    const before = JSON.stringify([existing, c.incoming]);
    const r = combineSegments(existing, c.incoming);

    t.equal(JSON.stringify([existing, c.incoming]), before, 'inputs not mutated');
    t.same(r.segments.map((s) => s.speaker), c.expect.segments.map(([sp]) => sp), 'speakers');
    c.expect.segments.forEach(([, text], i) => {
      if (typeof text === 'string') t.equal(r.segments[i]?.text, text, `text ${i}`);
      else t.match(r.segments[i]?.text, text, `text ${i}`);
    });
    if (c.expect.ids) t.same(r.segments.map((s) => s.id), c.expect.ids.map((i) => all[i]?.id), 'ids');
    if (c.expect.updated !== undefined) t.equal(r.updated.length, c.expect.updated, 'updated count');
    t.same(r.removedIds, (c.expect.removed ?? []).map((i) => existing[i]?.id), 'removed ids');
    for (const u of r.updated) t.same(u, r.segments.find((s) => s.id === u.id), 'updated mirrors the transcript');
    if (!c.expect.cleaned) t.equal(concat(r.segments.map((s) => s.text)), concat(all.map((s) => s.text)), 'words preserved');
  });
}

t.test('a removed tail id never reappears among the segments', async (t) => {
  const existing = [seg('First.', 'SPEAKER_00', 0, 1), seg('unfinished', 'SPEAKER_00', 1, 2)];
  const r = combineSegments(existing, [seg('unfinished and continuing now.', 'SPEAKER_01', 2.1, 4)]);
  t.same(r.removedIds, [existing[1]!.id]);
  t.notOk(r.segments.some((s) => s.id === existing[1]!.id));
  t.equal(r.segments[0]?.id, existing[0]!.id, 'earlier stored segments untouched');
  t.equal(r.segments[0], existing[0], 'an untouched stored segment comes back as itself, not as a copy');
  t.equal(r.segments[1]?.start, 1, 'the receiving segment starts where the emptied one did');
});

t.test('mergeBatch is the first step on its own', async (t) => {
  const batch = [seg('one', 'SPEAKER_00', 0, 1), seg('two.', 'SPEAKER_00', 1, 2), seg('  ', 'SPEAKER_01', 2, 3)];
  const merged = mergeBatch(batch);
  t.same(merged.map((s) => [s.id, s.text, s.end]), [[batch[0]!.id, 'one two.', 2]], 'blank new segments dropped');
  t.equal(batch[0]!.text, 'one', 'input not mutated');
  t.same(mergeBatch([]), []);
});
