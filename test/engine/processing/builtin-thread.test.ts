// The built-in processor's thread (the service sends it long transcripts): the same structure as on the calling
// thread, the calling thread free while a long transcript is processed, short ones answered without the hop.
import t from 'tap';
import { BuiltinProcessor, processBuiltin, THREAD_FROM_CHARS } from '../../../engine/processing/builtin.js';
import type { ProcessInput } from '../../../engine/processing/types.js';

const LINES = [
  'Remind me to call the dentist tomorrow at 3pm.',
  'I also need to finish the quarterly budget report by Friday.',
  "We have a team meeting on Monday at 10 for an hour to review the product launch. Let's send the slides to the client.",
  'I love hiking in the Alps and my favorite color is blue.',
];

function transcript(segments: number): ProcessInput {
  return {
    segments: Array.from({ length: segments }, (_, i) => ({ text: LINES[i % LINES.length]!, start: i * 4, end: i * 4 + 3.5, speaker: `SPEAKER_0${i % 2}`, speakerId: i % 2, isUser: i % 2 === 0 })),
    textSource: 'audio_transcript',
    language: 'en',
    startedAt: '2026-11-23T12:00:00.000Z',
    finishedAt: '2026-11-23T13:00:00.000Z',
    allowDiscard: true,
  };
}

/** Whether `p` had settled when the calling thread's next event-loop turn came (setImmediate). */
async function settledWithinOneTurn(p: Promise<unknown>): Promise<boolean> {
  let settled = false;
  void p.then(() => (settled = true));
  await new Promise((resolve) => setImmediate(resolve));
  return settled;
}

t.test('the thread answers what the calling thread would', async (t) => {
  // Every transcript to the thread.
  const proc = new BuiltinProcessor({ threadFromChars: 0 });
  t.teardown(() => proc.close());
  for (const n of [1, 4, 40]) t.same(await proc.process(transcript(n)), processBuiltin(transcript(n)), `${n} segments`);
  t.same(await proc.run(transcript(4), 'builtin-fallback'), processBuiltin(transcript(4), 'builtin-fallback'), 'as the LLM fallback');
});

t.test('a long transcript leaves the calling thread free', async (t) => {
  const long = transcript(2000);
  const onThread = new BuiltinProcessor({ threadFromChars: THREAD_FROM_CHARS });
  t.teardown(() => onThread.close());
  const pending = onThread.process(long);
  t.equal(await settledWithinOneTurn(pending), false, 'on the thread: the next turn comes before the answer');
  t.ok((await pending).structured.title.length > 0, 'and the answer comes');
  // The same transcript inline has been processed, synchronously, before the next turn.
  t.equal(await settledWithinOneTurn(new BuiltinProcessor().process(long)), true, 'inline: done within the call');
  // A short one, under THREAD_FROM_CHARS, does not take the hop (nor start a thread for it).
  const short = new BuiltinProcessor({ threadFromChars: THREAD_FROM_CHARS });
  t.teardown(() => short.close());
  t.equal(await settledWithinOneTurn(short.process(transcript(30))), true, 'a 30-segment transcript: inline');
});

t.test('closed, it refuses transcripts instead of starting a new thread', async (t) => {
  const proc = new BuiltinProcessor({ threadFromChars: 0 });
  await proc.process(transcript(1));
  await proc.close();
  await t.rejects(proc.process(transcript(1)), /closed/);
  const never = new BuiltinProcessor({ threadFromChars: 0 });
  await never.close();
  await t.rejects(never.process(transcript(1)), /closed/, 'closed before its first transcript');
});
