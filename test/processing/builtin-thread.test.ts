// The built-in processor on its own thread (as the service runs it): the same structure as on the calling thread, and
// the calling thread stays free while a long transcript is processed.
import t from 'tap';
import { BuiltinProcessor, processBuiltin } from '../../engine/processing/builtin.js';
import type { ProcessInput } from '../../engine/processing/types.js';

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
  const proc = new BuiltinProcessor({ thread: true });
  t.teardown(() => proc.close());
  for (const n of [1, 4, 40]) t.same(await proc.process(transcript(n)), processBuiltin(transcript(n)), `${n} segments`);
  t.same(await proc.run(transcript(4), 'builtin-fallback'), processBuiltin(transcript(4), 'builtin-fallback'), 'as the LLM fallback');
});

t.test('a long transcript leaves the calling thread free', async (t) => {
  const long = transcript(2000);
  const onThread = new BuiltinProcessor({ thread: true });
  t.teardown(() => onThread.close());
  const pending = onThread.process(long);
  t.equal(await settledWithinOneTurn(pending), false, 'on the thread: the next turn comes before the answer');
  t.ok((await pending).structured.title.length > 0, 'and the answer comes');
  // The same transcript inline has been processed, synchronously, before the next turn.
  t.equal(await settledWithinOneTurn(new BuiltinProcessor().process(long)), true, 'inline: done within the call');
});

t.test('closed, it refuses transcripts instead of starting a new thread', async (t) => {
  const proc = new BuiltinProcessor({ thread: true });
  await proc.process(transcript(1));
  await proc.close();
  await t.rejects(proc.process(transcript(1)), /closed/);
  const never = new BuiltinProcessor({ thread: true });
  await never.close();
  await t.rejects(never.process(transcript(1)), /closed/, 'closed before its first transcript');
});
