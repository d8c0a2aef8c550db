// A speaker naming themselves in a live transcript ("my name is Ana", "I'm Ana", "Ana is my name", and the same in a
// few other languages): the name found, so that the session can suggest that person for the speaker.

/** A name: one or two capitalised words (any script with letter case), as speech providers write proper nouns. */
const NAME = String.raw`(\p{Lu}[\p{L}'’-]{1,30}(?:\s+\p{Lu}[\p{L}'’-]{1,30})?)`;

/**
 * Phrases that introduce the speaker's own name, case-insensitive up to the name itself (the name must be capitalised:
 * "I'm going" is not an introduction). `loose` cues ("I'm", "I am") also precede ordinary capitalised words.
 */
const CUES: readonly { re: RegExp; loose: boolean }[] = [
  // English
  { re: new RegExp(String.raw`\b(?:[Mm]y name(?:'s| is)|[Cc]all me)\s+${NAME}`, 'u'), loose: false },
  { re: new RegExp(String.raw`\b(?:I'm|I’m|I am)\s+${NAME}`, 'u'), loose: true },
  { re: new RegExp(String.raw`${NAME}\s+is my name\b`, 'u'), loose: false },
  // Spanish, Portuguese, Italian, French, German, Dutch
  { re: new RegExp(String.raw`\b(?:[Mm]e llamo|[Mm]i nombre es|[Mm]eu nome é|[Mm]e chamo|[Mm]i chiamo|[Ii]l mio nome è|[Jj]e m'appelle|[Jj]e m’appelle|[Mm]on nom est|[Ii]ch heiße|[Ii]ch heisse|[Mm]ein Name ist|[Ii]k heet|[Mm]ijn naam is)\s+${NAME}`, 'u'), loose: false },
];

/**
 * Capitalised words that follow "I'm" or "I am" without being a name: a sentence start the provider capitalised, a
 * nationality, a greeting. Checked only for those two loose cues.
 */
const NOT_NAMES = new Set(
  (
    'a an the and but so not just here there now back home fine good great okay ok sorry sure glad happy ready done ' +
    'going coming trying looking still also really very quite pretty so too only always never from in at on with ' +
    'american english british french german spanish italian chinese japanese indian canadian australian mexican ' +
    'hello hi hey yes no well right oh um uh like what who that this it'
  ).split(' '),
);

/** The name a speaker gives as their own in `text`, or undefined. */
export function selfIntroducedName(text: string): string | undefined {
  for (const { re, loose } of CUES) {
    const m = re.exec(text);
    if (!m) continue;
    const name = m[1]!.replace(/['’]s$/u, '').replace(/[-'’]+$/u, '');
    const first = name.split(/\s+/u)[0]!.toLowerCase();
    if (loose && NOT_NAMES.has(first)) continue;
    // "I'm Ana. Hello": a second word that is no name is dropped.
    const words = name.split(/\s+/u).filter((w) => !NOT_NAMES.has(w.toLowerCase()));
    if (words.length === 0) continue;
    return words.join(' ');
  }
  return undefined;
}
