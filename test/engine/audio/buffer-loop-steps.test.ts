// A session's 600 ms step is skipped when it has nothing to do (BufferLoop.hasWork()): every state in which hasWork()
// answers false is one in which flush() answers an empty result without touching the store, and each kind of work
// (audio with no conversation, segments, speaker assignments, the silence timeout) makes it answer true.
import t from 'tap';
import { BufferLoop, type RawSegment } from '../../../engine/audio/buffer-loop.js';
import { ManualClock } from '../../../engine/clock.js';
import type { ConversationLifecycle } from '../../../engine/conversations/lifecycle.js';
import type { ConversationsRepository } from '../../../engine/db/conversations.js';
import { createLogger } from '../../../engine/logger.js';

/** The store and lifecycle a loop talks to, recording each call by name. */
function collaborators(clock: ManualClock) {
  const calls: string[] = [];
  let next = 1;
  const lifecycle = {
    open: (_uid: string, _source: string | null, _language: string, startedAtMs: number) => {
      calls.push('open');
      return Promise.resolve({ id: `c${next++}`, startedAt: new Date(startedAtMs).toISOString() });
    },
    end: () => {
      calls.push('end');
      return Promise.resolve('processing');
    },
  } as unknown as ConversationLifecycle;
  const conversations = new Proxy({} as ConversationsRepository, {
    get: (_target, name) => (..._args: unknown[]) => {
      calls.push(String(name));
      return Promise.resolve(name === 'segmentsWithIds' ? [] : true);
    },
  });
  const loop = new BufferLoop({ uid: 'u1', sessionId: 's1', source: 'omi', language: 'en', conversationTimeoutS: 120, lifecycle, conversations, clock, logger: createLogger('silent') });
  return { loop, calls };
}

const segment = (text: string, start: number): RawSegment => ({ text, speaker: 'SPEAKER_00', start, end: start + 1, isUser: false, sttProvider: 'provider_a' }) as RawSegment;

t.test('hasWork() is false exactly when a step would change nothing', async (t) => {
  const clock = new ManualClock();
  const { loop, calls } = collaborators(clock);
  /** Asserts that the loop has no work, and that a step run anyway answers nothing and makes no call. */
  const idle = async (when: string): Promise<void> => {
    t.equal(loop.hasWork(), false, `no work ${when}`);
    const before = calls.length;
    const r = await loop.step();
    t.same([r.updated.length, r.removedIds.length, r.ended], [0, 0, undefined], `a step ${when} answers nothing`);
    t.same(calls.slice(before), [], `a step ${when} makes no call`);
  };

  await idle('before any audio');
  loop.noteAudio();
  t.equal(loop.hasWork(), true, 'audio with no conversation: the step opens one');
  await loop.step();
  t.same(calls, ['open']);
  await idle('once the conversation is open');

  clock.advance(600);
  loop.add([segment('hello there', 0)]);
  t.equal(loop.hasWork(), true, 'a new segment');
  const r = await loop.step();
  t.equal(r.updated.length, 1, 'the step returns the segment');
  t.ok(calls.includes('replaceInProgressSegmentsFrom'), 'and stores it');
  await idle('after the segment was stored');

  loop.add([segment('   ', 1)]);
  await idle('after a blank segment (dropped on arrival)');

  loop.reassign(['nope']);
  t.equal(loop.hasWork(), true, 'a speaker assignment to apply');
  await loop.step();
  await idle('once the assignment was applied');

  clock.advance(119_000);
  await idle('1 s before the silence timeout');
  clock.advance(1_000);
  t.equal(loop.hasWork(), true, 'the silence timeout is due');
  const ended = await loop.step();
  t.equal(ended.ended?.outcome, 'processing', 'the step ends the conversation');
  await idle('after the conversation ended, with no audio since');
  loop.noteAudio();
  t.equal(loop.hasWork(), true, 'audio after the end: the next conversation is opened');
});
