// The built-in category of a transcript: the keyword index gives what scoring every token against every stem gives.
import t from 'tap';
import { CATEGORY_KEYWORDS, categorize, tokenize } from '../../../engine/processing/builtin.js';

/** The rule as written: each stem against each token (5+ letters as a prefix, shorter ones exactly or plus s), a
 * phrase twice. */
function byEveryStem(text: string): string {
  const tokens = tokenize(text);
  const spaced = ` ${tokens.join(' ')} `;
  let best = 'other';
  let bestScore = 0;
  for (const [category, stems] of CATEGORY_KEYWORDS) {
    let score = 0;
    for (const stem of stems) {
      if (stem.includes(' ')) {
        if (spaced.includes(` ${stem} `)) score += 2;
        continue;
      }
      for (const tok of tokens) if (stem.length >= 5 ? tok.startsWith(stem) : tok === stem || tok === `${stem}s`) score += 1;
    }
    if (score > bestScore) {
      best = category;
      bestScore = score;
    }
  }
  return best;
}

t.test('what a user would call each conversation', async (t) => {
  t.equal(categorize('The dentist moved my appointment, and the doctor wants a blood test before the flu shot.'), 'health');
  t.equal(categorize('We need the quarterly report and the slides for the client meeting before the deadline.'), 'work');
  t.equal(categorize('Our flight leaves at six, the hotel booking is confirmed, pack the passport.'), 'travel');
  t.equal(categorize('Interest rates and inflation are pushing us toward a recession, the economic outlook is grim.'), 'economics', 'a phrase counts');
  t.equal(categorize('hello how are you fine thanks'), 'other', 'nothing matched');
  t.equal(categorize(''), 'other');
});

t.test('the same category as scoring every token against every stem, on 3,000 generated transcripts', async (t) => {
  const stems = CATEGORY_KEYWORDS.flatMap(([, s]) => s);
  const filler = ['we', 'should', 'talk', 'about', 'the', 'thing', "i'm", 'really', 'taxes', 'games', 'ais', 'apps', 'running', 'Inflation', 'rate', 'free', 'will'];
  let seed = 42;
  const rand = (n: number): number => {
    seed = (seed * 1103515245 + 12345) % 2 ** 31;
    return seed % n;
  };
  let mismatches = 0;
  for (let i = 0; i < 3000; i++) {
    const words: string[] = [];
    for (let w = rand(60); w >= 0; w--) {
      const stem = stems[rand(stems.length)]!;
      // A stem as said, with a suffix, cut short, or a filler word.
      const pick = rand(5);
      words.push(pick === 0 ? stem : pick === 1 ? `${stem}${['s', 'ing', 'ed', 'ers'][rand(4)]}` : pick === 2 ? stem.slice(0, Math.max(1, stem.length - 1)) : filler[rand(filler.length)]!);
    }
    const text = words.join(rand(2) ? ' ' : ', ');
    if (categorize(text) !== byEveryStem(text)) mismatches++;
  }
  t.equal(mismatches, 0);
});
