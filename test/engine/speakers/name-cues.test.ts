// Names speakers give themselves in a live transcript, and sentences that only look like it.
import t from 'tap';
import { selfIntroducedName } from '../../../engine/speakers/name-cues.js';

t.test('introductions in English and a few other languages', async (t) => {
  const cases: [string, string | undefined][] = [
    ['Hi everyone, my name is Carol.', 'Carol'],
    ["Hello, I'm Ana Lopez and I work here.", 'Ana Lopez'],
    ['I am Bob.', 'Bob'],
    ['Dmitri is my name, by the way.', 'Dmitri'],
    ["My name's Lee", 'Lee'],
    ['Me llamo José.', 'José'],
    ["Bonjour, je m'appelle Élodie.", 'Élodie'],
    ['Hallo, ich heiße Jürgen.', 'Jürgen'],
    ["I'm going to the store.", undefined],
    ["I'm Sorry about that.", undefined],
    ['I am American.', undefined],
    ['What is my name again?', undefined],
    ['my name is not important', undefined],
    ['The weather is fine today.', undefined],
  ];
  for (const [text, name] of cases) t.equal(selfIntroducedName(text), name, text);
});
