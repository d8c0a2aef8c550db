// A cheap offline language guess for a transcript segment: the script's letters first, then common words for Latin text.
// Its only job is to spare a language-model request for text already in the target language; when unsure it says so.

/** Scripts that name one language (or a small family whose first member is the usual one). */
const SCRIPTS: readonly { lang: string; re: RegExp }[] = [
  { lang: 'ja', re: /[\u3040-\u30ff]/g },
  { lang: 'ko', re: /[\uac00-\ud7af\u1100-\u11ff]/g },
  { lang: 'zh', re: /[\u4e00-\u9fff\u3400-\u4dbf]/g },
  { lang: 'ru', re: /[\u0400-\u04ff]/g },
  { lang: 'ar', re: /[\u0600-\u06ff]/g },
  { lang: 'he', re: /[\u0590-\u05ff]/g },
  { lang: 'el', re: /[\u0370-\u03ff]/g },
  { lang: 'hi', re: /[\u0900-\u097f]/g },
  { lang: 'bn', re: /[\u0980-\u09ff]/g },
  { lang: 'ta', re: /[\u0b80-\u0bff]/g },
  { lang: 'th', re: /[\u0e00-\u0e7f]/g },
];

/** Frequent short words of the Latin-script languages heard most; a word common to several counts a share for each. */
const COMMON_WORDS: Readonly<Record<string, readonly string[]>> = {
  en: ['the', 'and', 'is', 'are', 'you', 'that', 'it', 'of', 'to', 'in', 'was', 'for', 'with', 'this', 'have', 'not', 'what', 'we', 'they', 'be', 'my', 'i', "i'm", "it's", "don't", 'will', 'can', 'just', 'so', 'do', 'how', 'at', 'on', 'your', 'there', 'would', 'about', 'know', 'think', 'yes', 'going', 'like', 'want', 'she', 'he', 'his', 'her', 'from', 'were', 'been', 'but', 'or'],
  es: ['el', 'los', 'las', 'es', 'y', 'que', 'de', 'en', 'un', 'una', 'por', 'para', 'con', 'pero', 'como', 'está', 'estoy', 'muy', 'yo', 'tú', 'qué', 'sí', 'del', 'al', 'lo', 'le', 'su', 'mi', 'hay', 'hola', 'gracias', 'bueno', 'también', 'cómo', 'dónde', 'cuando', 'ahora', 'tengo', 'tiene', 'vamos', 'nosotros', 'ellos', 'eso', 'esto', 'pues', 'mañana', 'hoy', 'bien', 'ser', 'son'],
  pt: ['o', 'os', 'as', 'é', 'e', 'que', 'de', 'em', 'um', 'uma', 'para', 'com', 'não', 'mas', 'como', 'está', 'estou', 'muito', 'eu', 'você', 'sim', 'do', 'da', 'no', 'na', 'ao', 'meu', 'tem', 'olá', 'obrigado', 'obrigada', 'bom', 'também', 'onde', 'quando', 'agora', 'tenho', 'vamos', 'nós', 'eles', 'isso', 'isto', 'amanhã', 'hoje', 'bem', 'são'],
  fr: ['le', 'la', 'les', 'est', 'et', 'que', 'de', 'en', 'un', 'une', 'pour', 'avec', 'pas', 'mais', 'comme', 'je', 'tu', 'il', 'elle', 'nous', 'vous', 'ils', 'oui', 'du', 'des', 'au', 'aux', 'mon', 'ma', 'ce', 'cette', "c'est", "j'ai", 'bonjour', 'merci', 'bien', 'aussi', 'où', 'quand', 'maintenant', 'avons', 'sont', 'très', 'demain', "aujourd'hui", 'être', 'avoir', 'ne', 'qui', 'sur', 'dans'],
  de: ['der', 'die', 'das', 'ist', 'und', 'dass', 'zu', 'ein', 'eine', 'für', 'mit', 'nicht', 'aber', 'wie', 'ich', 'du', 'er', 'sie', 'wir', 'ihr', 'ja', 'nein', 'den', 'dem', 'des', 'im', 'mein', 'meine', 'hallo', 'danke', 'gut', 'auch', 'wo', 'wann', 'jetzt', 'habe', 'haben', 'sind', 'sehr', 'morgen', 'heute', 'sein', 'auf', 'was', 'es', 'noch', 'schon', 'bitte', 'kann'],
  it: ['il', 'lo', 'gli', 'è', 'e', 'che', 'di', 'in', 'un', 'una', 'per', 'con', 'non', 'ma', 'come', 'sono', 'molto', 'io', 'tu', 'lui', 'lei', 'noi', 'voi', 'sì', 'del', 'della', 'nel', 'al', 'mio', 'mia', 'ciao', 'grazie', 'bene', 'anche', 'dove', 'quando', 'adesso', 'ora', 'ho', 'abbiamo', 'questo', 'questa', 'domani', 'oggi', 'essere', 'cosa', 'perché', 'ci', 'si', 'più'],
  nl: ['de', 'het', 'een', 'is', 'en', 'dat', 'van', 'in', 'voor', 'met', 'niet', 'maar', 'hoe', 'ik', 'jij', 'je', 'hij', 'zij', 'wij', 'we', 'ja', 'nee', 'mijn', 'hallo', 'dank', 'goed', 'ook', 'waar', 'wanneer', 'nu', 'heb', 'hebben', 'zijn', 'erg', 'morgen', 'vandaag', 'wat', 'er', 'op', 'naar', 'al', 'nog', 'wel', 'kan', 'dit', 'die', 'te'],
};

/** word → the languages it is common in. */
const WORD_LANGS: ReadonlyMap<string, readonly string[]> = (() => {
  const m = new Map<string, string[]>();
  for (const [lang, words] of Object.entries(COMMON_WORDS)) for (const w of words) m.set(w, [...(m.get(w) ?? []), lang]);
  return m;
})();

/** Letters only found in one of the Latin-script languages above: a strong hint where common words tie. */
const LETTER_HINTS: readonly { lang: string; re: RegExp }[] = [
  { lang: 'es', re: /[ñ¿¡]/ },
  { lang: 'pt', re: /[ãõ]/ },
  { lang: 'de', re: /[äöüß]/ },
  { lang: 'fr', re: /[èêëœç]/ },
];

/** A Latin-script guess needs this many common-word hits, and the winner this share of them. */
const MIN_HITS = 2;
const MIN_SHARE = 0.6;
/** A script guess needs this share of the text's letters. */
const MIN_SCRIPT_SHARE = 0.3;

const WORD = /[\p{L}']+/gu;

/**
 * The language of `text` as a lowercase ISO 639-1 code, or undefined when the text is too short or too mixed to tell.
 * Costs a few microseconds for a sentence (docs/performance.md, translation).
 */
export function detectLanguage(text: string): string | undefined {
  const letters = text.replace(/[^\p{L}]/gu, '').length;
  if (letters === 0) return undefined;
  for (const { lang, re } of SCRIPTS) {
    const n = text.match(re)?.length ?? 0;
    if (n / letters >= MIN_SCRIPT_SHARE) {
      // Kanji are Han too: any kana makes it Japanese, which the first entry already caught.
      if (lang === 'ru' && /[іїєґ]/i.test(text)) return 'uk';
      return lang;
    }
  }
  const score = new Map<string, number>();
  let hits = 0;
  for (const m of text.toLowerCase().matchAll(WORD)) {
    const langs = WORD_LANGS.get(m[0]);
    if (!langs) continue;
    hits++;
    for (const l of langs) score.set(l, (score.get(l) ?? 0) + 1 / langs.length);
  }
  for (const { lang, re } of LETTER_HINTS) if (re.test(text)) score.set(lang, (score.get(lang) ?? 0) + 1);
  let best: string | undefined;
  let bestScore = 0;
  let total = 0;
  for (const [l, s] of score) {
    total += s;
    if (s > bestScore) [best, bestScore] = [l, s];
  }
  if (best === undefined || hits < MIN_HITS || bestScore / total < MIN_SHARE) return undefined;
  return best;
}

/** `pt-BR` → `pt`: languages compare by their primary subtag. */
export function primaryLanguage(tag: string): string {
  return tag.split(/[-_]/)[0]!.toLowerCase();
}
