// The embedding service on its thread: the same vectors as the embedder in-process, its CPU per second of audio, and
// the built-in match rule (BUILTIN_MATCH) measured on espeak-ng voices: five people enrolled from three clips each,
// their other clips identified, three strangers' clips never taken for one of them. Synthetic voices are far more
// regular than people, so these rates are a floor on real errors, not an estimate of them.
import t from 'tap';
import { createEmbeddingService } from '../../../engine/speakers/embedding-service.js';
import { BUILTIN_MATCH, cosineSimilarity, matchThresholds, meanEmbedding } from '../../../engine/speakers/embedding.js';
import { DspSpeakerEmbedder } from '../../../workers/speaker-embedding.js';
import { SENTENCES, voice } from '../../helpers/voices.js';

const dir = t.testdir();
const VOICES = ['en-us+m3', 'en-us+f2', 'en-us+m7', 'en-us+f4', 'en-gb+m1', 'en-us+klatt', 'en-us+f3', 'en-us+m1'];
const ENROLLED = 5;
const ENROL_CLIPS = 3;
const CLIPS = [
  ...SENTENCES,
  'Could you send me the report before the end of the week please.',
  'My favourite place to relax is the small park behind the library.',
  'The train was late again this morning so I missed the meeting.',
];
const audio = VOICES.map((v, i) => CLIPS.map((text, j) => voice(dir, `${i}-${j}`, v, text)));

t.test('on the thread: the in-process vectors, the caller keeps its audio, and the cost', async (t) => {
  const service = createEmbeddingService();
  t.teardown(() => service.close());
  const local = new DspSpeakerEmbedder();
  const pcm = audio[0]![0]!;
  const copy = pcm.slice();
  t.same(await service.embed(pcm), local.embed(pcm), 'the same vector as in-process');
  t.same(pcm, copy, "the caller's audio is untouched (a copy moved to the thread)");
  t.equal(service.model, local.name);
  t.equal(service.dimension, local.dimension);
  t.equal(matchThresholds(service.model), BUILTIN_MATCH);

  const clip = audio[1]!.reduce((a, b) => (a.length > b.length ? a : b));
  for (let i = 0; i < 10; i++) await service.embed(clip);
  const runs = 40;
  const started = process.cpuUsage();
  const wall = performance.now();
  for (let i = 0; i < runs; i++) await service.embed(clip);
  const cpu = process.cpuUsage(started);
  const seconds = (runs * clip.length) / 16000;
  t.comment(`${((cpu.user + cpu.system) / seconds).toFixed(0)} µs CPU (whole process) per second of audio on the thread, ${(((performance.now() - wall) * 1000) / seconds).toFixed(0)} µs wall; ${(clip.length / 16000).toFixed(1)} s clip x ${runs}`);
});

t.test(`the built-in rule (similarity ${BUILTIN_MATCH.similarity}, margin ${BUILTIN_MATCH.margin}) on enrolled voices and strangers`, async (t) => {
  const service = createEmbeddingService();
  t.teardown(() => service.close());
  const vectors = await Promise.all(audio.map((clips) => Promise.all(clips.map((pcm) => service.embed(pcm)))));
  const prints = vectors.slice(0, ENROLLED).map((v) => meanEmbedding(v.slice(0, ENROL_CLIPS), service.dimension));
  let right = 0;
  let wrong = 0;
  let undecided = 0;
  let strangersTaken = 0;
  let strangers = 0;
  for (let i = 0; i < VOICES.length; i++) {
    for (let j = ENROL_CLIPS; j < CLIPS.length; j++) {
      const scores = prints.map((p, k) => ({ k, s: cosineSimilarity(p, vectors[i]![j]!) })).sort((a, b) => b.s - a.s);
      const match = scores[0]!.s >= BUILTIN_MATCH.similarity && scores[0]!.s - scores[1]!.s >= BUILTIN_MATCH.margin;
      if (i >= ENROLLED) {
        strangers++;
        if (match) strangersTaken++;
      } else if (!match) undecided++;
      else if (scores[0]!.k === i) right++;
      else wrong++;
    }
  }
  const known = right + wrong + undecided;
  t.comment(`enrolled: ${right}/${known} identified, ${wrong} wrong, ${undecided} undecided; strangers taken for someone: ${strangersTaken}/${strangers}`);
  t.equal(wrong, 0, 'no one is taken for someone else');
  t.equal(strangersTaken, 0, 'no stranger is taken for an enrolled voice');
  t.ok(right / known >= 0.85, `most clips of enrolled voices are identified (${right}/${known})`);
});
