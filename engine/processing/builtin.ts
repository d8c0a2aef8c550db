// The built-in deterministic extractor: discard decision, title, overview, category, action items, events and memories without any network.
// One file because the extractor's word lists and rules are read together; the date phrases live in when.ts.
import {
  type ConversationCategory,
  type ConversationProcessor,
  type ExtractedActionItem,
  type ExtractedEvent,
  type ExtractedMemory,
  type MemoryCategory,
  type ProcessInput,
  type ProcessResult,
  type Structured,
} from './types.js';
import { resolveWhen, stripWhen, parseDurationMinutes } from './when.js';
import { TaskThread } from '../runtime/task-thread.js';
import type { BuiltinTask } from './types.js';

/** Transcripts longer than this many words are always kept, without a discard check, as in the compatible system. */
export const KEEP_WORDS = 100;
/** Texts shorter than this many characters yield no memories, as in the compatible system. */
export const MIN_MEMORY_TEXT_CHARS = 25;
export const MAX_TITLE_WORDS = 10;
export const MAX_ACTION_ITEM_WORDS = 15;
export const MAX_MEMORIES = 8;
export const MAX_MEMORY_CHARS = 500;
export const DISCARDED_EMOJI = '🧠';

const STOPWORDS = new Set(
  ('a an the and or but if then so of to in on at by for with from up down out over about into onto as is are was were be been being am ' +
    'i me my mine we us our you your he him his she her it its they them their this that these those there here what which who whom whose ' +
    'when where why how all any both each few more most other some such no nor not only own same than too very can will just should would ' +
    'could may might must shall do does did doing have has had having get got go going gone went let lets also really actually basically ' +
    "like just maybe probably think thought know knew mean want wanted need needs needed yeah yes okay ok um uh hmm oh well right sure thing things " +
    "i'm i've i'll i'd we're we'll we've you're it's that's there's don't didn't can't won't isn't aren't let's gonna wanna kind sort lot " +
    'please thanks thank today tomorrow tonight yesterday morning afternoon evening night week weekend next last day time am pm ' +
    'monday tuesday wednesday thursday friday saturday sunday january february march april may june july august september october november december ' +
    'remind remember forget make sure said say says tell told one two three four five six seven eight nine ten hour hours minute minutes'
  ).split(/\s+/),
);

/** Words that carry no content on their own: a text made only of these is small talk. */
const FILLER = new Set(
  ('hi hello hey hiya yo bye goodbye cya see ya yeah yep yup yes no nope okay ok um uh uhh umm hmm mm mhm oh ah huh wow cool nice great ' +
    'thanks thank you cheers sure right alright fine good morning afternoon evening night how are doing what is up sup lol haha test testing ' +
    'one two three is this on can hear me the a it so well just i am im i\'m fine too and all how\'s going whats what\'s later talk soon').split(/\s+/),
);

/** Keyword stems per category; a token counts when it starts with a stem of 5+ letters, or equals a shorter one. */
export const CATEGORY_KEYWORDS: ReadonlyArray<readonly [ConversationCategory, readonly string[]]> = [
  ['health', ['doctor', 'dentist', 'health', 'hospital', 'medic', 'symptom', 'pain', 'sick', 'fever', 'therap', 'workout', 'exercis', 'sleep', 'diet', 'allerg', 'nurse', 'clinic', 'prescription', 'vaccin', 'blood', 'headache', 'flu', 'gym', 'calories', 'pill']],
  ['finance', ['budget', 'money', 'invest', 'stock', 'bank', 'loan', 'mortgage', 'savings', 'expens', 'tax', 'taxes', 'salary', 'credit', 'debt', 'payment', 'invoice', 'crypto', 'dividend', 'portfolio', 'pay', 'bills', 'rent', 'dollars', 'financ']],
  ['work', ['meeting', 'deadline', 'project', 'manager', 'colleague', 'office', 'report', 'client', 'boss', 'coworker', 'standup', 'sprint', 'presentation', 'quarterly', 'team', 'task', 'job', 'promotion', 'shift', 'agenda', 'slides', 'review']],
  ['business', ['business', 'revenue', 'customer', 'sales', 'market', 'company', 'strategy', 'contract', 'partner', 'profit', 'pricing', 'product', 'launch', 'vendor', 'negotiat', 'quarter']],
  ['entrepreneurship', ['startup', 'founder', 'investor', 'funding', 'venture', 'pitch', 'seed', 'cofounder', 'entrepreneur', 'bootstrap', 'valuation']],
  ['technology', ['software', 'code', 'coding', 'computer', 'server', 'database', 'program', 'bug', 'deploy', 'api', 'app', 'laptop', 'phone', 'algorithm', 'cloud', 'python', 'javascript', 'typescript', 'developer', 'engineer', 'github', 'ai', 'robot', 'internet', 'website', 'backend', 'frontend']],
  ['education', ['school', 'class', 'homework', 'exam', 'teacher', 'student', 'study', 'studying', 'lecture', 'course', 'university', 'college', 'learn', 'lesson', 'grade', 'professor', 'tutor', 'semester', 'thesis']],
  ['family', ['mom', 'dad', 'mother', 'father', 'sister', 'brother', 'family', 'grandma', 'grandpa', 'aunt', 'uncle', 'cousin', 'parents', 'son', 'daughter', 'wife', 'husband', 'kids', 'children']],
  ['parenting', ['toddler', 'baby', 'daycare', 'diaper', 'parenting', 'nanny', 'babysit', 'bedtime', 'pediatric', 'stroller']],
  ['romantic', ['girlfriend', 'boyfriend', 'date', 'dating', 'romantic', 'anniversary', 'valentine', 'love', 'partner', 'wedding', 'engaged', 'crush']],
  ['travel', ['travel', 'trip', 'flight', 'airport', 'hotel', 'vacation', 'passport', 'luggage', 'booking', 'tourist', 'visa', 'itinerary', 'beach', 'abroad', 'train', 'holiday']],
  ['sports', ['game', 'match', 'team', 'soccer', 'football', 'basketball', 'tennis', 'marathon', 'running', 'score', 'coach', 'league', 'player', 'baseball', 'golf', 'swimming', 'cycling', 'training', 'race']],
  ['music', ['music', 'song', 'band', 'concert', 'guitar', 'piano', 'album', 'singer', 'playlist', 'drums', 'melody', 'lyrics', 'violin']],
  ['entertainment', ['movie', 'film', 'show', 'netflix', 'series', 'episode', 'actor', 'theater', 'theatre', 'gaming', 'videogame', 'comedy', 'tv']],
  ['literature', ['book', 'novel', 'author', 'poem', 'poetry', 'chapter', 'reading', 'writer', 'library']],
  ['science', ['science', 'research', 'experiment', 'physics', 'chemistry', 'biology', 'scientist', 'hypothesis', 'data', 'theory', 'laboratory', 'lab', 'space', 'planet']],
  ['history', ['history', 'historical', 'century', 'ancient', 'empire', 'war', 'medieval', 'revolution']],
  ['politics', ['election', 'vote', 'government', 'president', 'senate', 'policy', 'politic', 'congress', 'minister', 'campaign', 'parliament']],
  ['news', ['news', 'headline', 'announced', 'breaking', 'journalist', 'article', 'reported']],
  ['weather', ['weather', 'rain', 'raining', 'sunny', 'forecast', 'snow', 'storm', 'temperature', 'cloudy', 'windy', 'humid']],
  ['legal', ['lawyer', 'legal', 'court', 'lawsuit', 'attorney', 'judge', 'contract', 'law', 'custody', 'settlement', 'sue']],
  ['philosophy', ['philosoph', 'meaning', 'existence', 'ethics', 'moral', 'consciousness', 'stoic', 'truth', 'free will']],
  ['spiritual', ['spiritual', 'meditat', 'prayer', 'pray', 'church', 'god', 'faith', 'soul', 'temple', 'mosque', 'religio', 'karma']],
  ['psychology', ['anxiety', 'stress', 'emotion', 'mental', 'psycholog', 'depress', 'feelings', 'therapist', 'mindset', 'motivation', 'burnout']],
  ['inspiration', ['inspir', 'dream', 'goal', 'goals', 'motivat', 'believe', 'passion', 'purpose']],
  ['social', ['friend', 'friends', 'party', 'hangout', 'dinner', 'drinks', 'neighbor', 'birthday', 'social', 'gathering', 'barbecue', 'brunch']],
  ['real', ['apartment', 'house', 'estate', 'realtor', 'property', 'landlord', 'lease', 'tenant', 'listing', 'condo']],
  ['architecture', ['architect', 'building', 'blueprint', 'construction', 'facade', 'skyscraper', 'renovat']],
  ['design', ['design', 'designer', 'logo', 'figma', 'layout', 'typography', 'mockup', 'wireframe', 'color', 'palette', 'sketch']],
  ['economics', ['economy', 'economic', 'inflation', 'recession', 'interest rate', 'gdp', 'unemployment', 'tariff']],
  ['environment', ['climate', 'environment', 'recycl', 'pollution', 'carbon', 'emission', 'sustainab', 'solar', 'renewable', 'plastic', 'wildlife']],
  ['personal', ['personal', 'myself', 'feel', 'feeling', 'life', 'home', 'grocer', 'chores', 'errand', 'shopping', 'laundry', 'cook', 'cooking']],
];

export const CATEGORY_EMOJI: Readonly<Record<ConversationCategory, string>> = {
  personal: '🙂', education: '📚', health: '🩺', finance: '💰', legal: '⚖️', philosophy: '🤔', spiritual: '🙏', science: '🔬',
  entrepreneurship: '🚀', parenting: '🍼', romantic: '❤️', travel: '✈️', inspiration: '💡', technology: '💻', business: '💼',
  social: '🎉', work: '🗂️', sports: '🏅', politics: '🏛️', literature: '📖', history: '📜', architecture: '🏗️', music: '🎵',
  weather: '🌦️', news: '📰', entertainment: '🎬', psychology: '🧩', real: '🏠', design: '🎨', family: '👨‍👩‍👧', economics: '📈',
  environment: '🌱', other: '💬',
};

/** Verbs that open an imperative sentence ("Call the dentist", "Send the report"). */
const IMPERATIVE_VERBS = new Set(
  ('call email e-mail send buy book schedule finish submit pick review prepare pay write check fix update clean order text contact ask bring ' +
    'cancel renew sign read follow set reply respond file print draft share plan organize organise confirm reserve water feed walk return ' +
    'grab get take move transfer upload download install backup back register apply invite remind tell message ping visit find research ' +
    'call book practice study finalize finalise deliver post publish').split(/\s+/),
);

/** Lead-ins that turn the rest of the sentence into a task. */
const TASK_LEADS: readonly RegExp[] = [
  /\b(?:please\s+)?remind me to\s+(.+)/i,
  /\b(?:don't|do not|dont) forget to\s+(.+)/i,
  /\bremember to\s+(.+)/i,
  /\bmake sure (?:to|you|we|i)\s+(.+)/i,
  /\bi (?:(?:really|also|just|still|definitely|actually) )?(?:need|have|must|got) to\s+(.+)/i,
  /\bi must\s+(.+)/i,
  /\bi (?:(?:really|also|probably) )?should\s+(.+)/i,
  /\bwe (?:(?:really|also|just|still|definitely|actually) )?(?:need|have|must|got) to\s+(.+)/i,
  /\bwe should\s+(.+)/i,
  /\blet(?:'s| us)\s+(.+)/i,
  /\bi(?:'ll| will)\s+(.+)/i,
  /\bi(?:'m| am) going to\s+(.+)/i,
];

/** Nouns that make a dated sentence an event rather than only a due date. */
const EVENT_NOUNS =
  /\b(meeting|appointment|call|lunch|dinner|breakfast|brunch|coffee|interview|party|class|flight|session|visit|standup|stand-up|demo|checkup|check-up|concert|game|match|date|exam|presentation|workshop|conference|wedding|ceremony|reservation|practice|rehearsal|webinar|sync|review|training|show|movie|trip|doctor|dentist)\b/i;

/** A sentence about the past is not a plan. */
const PAST = /\b(yesterday|last (?:week|night|month|year|monday|tuesday|wednesday|thursday|friday|saturday|sunday)|ago|went|was|were|had|did)\b/i;

export function tokenize(text: string): string[] {
  return text.toLowerCase().match(/[a-z0-9]+(?:'[a-z]+)?/g) ?? [];
}

export function splitSentences(text: string): string[] {
  return text
    .replace(/\s+/g, ' ')
    .split(/(?<=[.!?])\s+(?=\S)|\n+/)
    .map((s) => s.trim())
    .filter((s) => /[A-Za-z0-9]/.test(s));
}

const SMALL_WORDS = new Set('a an the and but or nor for so yet at by in of on to up as with from into via vs per'.split(' '));

export function titleCase(words: readonly string[]): string {
  return words
    .map((w, i) => {
      const lower = w.toLowerCase();
      if (i > 0 && i < words.length - 1 && SMALL_WORDS.has(lower)) return lower;
      // Keep acronyms and mixed case as said ("API", "iPhone").
      if (/[A-Z]/.test(w.slice(1))) return w;
      return lower.charAt(0).toUpperCase() + lower.slice(1);
    })
    .join(' ');
}

/**
 * CATEGORY_KEYWORDS indexed for categorize(): a stem of 5+ letters under itself (a token matches it by its prefix
 * of that length), a shorter stem under itself and its plural (exact matches), phrases apart. Each entry lists the
 * index of every category that names it, once per time it is named.
 *
 * Rationale: comparing every token with every stem was a sizeable share of a process-conversation job's CPU; a
 * distinct token now costs one lookup per prefix length.
 */
const CATEGORY_INDEX = (() => {
  const prefixes = new Map<string, number[]>();
  const exact = new Map<string, number[]>();
  const phrases: (readonly [phrase: string, category: number])[] = [];
  let longest = 0;
  const add = (map: Map<string, number[]>, key: string, category: number): void => {
    const list = map.get(key);
    if (list) list.push(category);
    else map.set(key, [category]);
  };
  CATEGORY_KEYWORDS.forEach(([, stems], category) => {
    for (const stem of stems) {
      if (stem.includes(' ')) {
        phrases.push([` ${stem} `, category]);
      } else if (stem.length >= 5) {
        add(prefixes, stem, category);
        longest = Math.max(longest, stem.length);
      } else {
        add(exact, stem, category);
        add(exact, `${stem}s`, category);
      }
    }
  });
  return { prefixes, exact, phrases, longest };
})();

/**
 * Scores every category by keyword hits (a stem counts once per token it matches, a phrase twice if said); the best
 * scorer wins, the first listed on a tie, `other` when nothing matched.
 */
export function categorize(text: string): ConversationCategory {
  const tokens = tokenize(text);
  const { prefixes, exact, phrases, longest } = CATEGORY_INDEX;
  const scores = new Array<number>(CATEGORY_KEYWORDS.length).fill(0);
  const counts = new Map<string, number>();
  for (const t of tokens) counts.set(t, (counts.get(t) ?? 0) + 1);
  for (const [token, n] of counts) {
    for (const c of exact.get(token) ?? []) scores[c]! += n;
    for (let len = 5; len <= Math.min(token.length, longest); len++) {
      const hits = prefixes.get(token.slice(0, len));
      if (hits) for (const c of hits) scores[c]! += n;
    }
  }
  if (phrases.length > 0) {
    const spaced = ` ${tokens.join(' ')} `;
    for (const [phrase, c] of phrases) if (spaced.includes(phrase)) scores[c]! += 2;
  }
  let best: ConversationCategory = 'other';
  let bestScore = 0;
  scores.forEach((score, c) => {
    if (score > bestScore) {
      best = CATEGORY_KEYWORDS[c]![0];
      bestScore = score;
    }
  });
  return best;
}

function contentWords(text: string): string[] {
  return tokenize(text).filter((w) => !STOPWORDS.has(w) && w.length > 1 && !/^\d+$/.test(w));
}

function informativeWordCount(text: string): number {
  return tokenize(text).filter((w) => !FILLER.has(w)).length;
}

function clip(words: string[], max: number): string[] {
  return words.length <= max ? words : words.slice(0, max);
}

const clean = (s: string): string => s.replace(/\s+/g, ' ').replace(/^[\s,;:-]+|[\s,;:.!?-]+$/g, '');

function capitalize(s: string): string {
  return s.charAt(0).toUpperCase() + s.slice(1);
}

/** Scores sentences by how many of the transcript's frequent content words they hold; questions and small talk score low. */
function rankSentences(sentences: readonly string[]): { sentence: string; index: number; score: number }[] {
  const freq = new Map<string, number>();
  for (const s of sentences) for (const w of contentWords(s)) freq.set(w, (freq.get(w) ?? 0) + 1);
  return sentences
    .map((sentence, index) => {
      const words = contentWords(sentence);
      let score = words.reduce((acc, w) => acc + (freq.get(w) ?? 0) + 1, 0);
      if (sentence.trim().endsWith('?')) score *= 0.6;
      if (words.length < 2) score *= 0.3;
      return { sentence, index, score };
    })
    .sort((a, b) => b.score - a.score || a.index - b.index);
}

/** Lead-ins dropped from a title: they say who talks, not what about. */
const TITLE_LEADS =
  /^(?:so|well|okay|ok|um|uh|hey|hi|hello|and|but|also|anyway|basically|actually|really|just|yeah|yes|please|remind me to|don't forget to|do not forget to|remember to|make sure to|i think|i guess|i need to|i have to|i want to|i'd like to|i would like to|need to|have to|want to|got to|we need to|we have to|we should|i should|let's|let us|i'll|i will|i'm going to|we're going to|we are going to|i am going to|going to|there is|there's|there will be|the|a|an|our|my)[\s,]+/i;

/** Pronoun-led starts rewritten to the noun phrase that follows ("I love hiking" → "Love hiking", "We have a meeting" → "Meeting"). */
const TITLE_PRONOUN_LEAD = /^(?:i|we|you|they|he|she|it)\s+(?:(?:am|'m|are|'re|is|was|were|'ve got|have got|have|'ve|had|are having|'re having|will have|also|really|just|do|did|will|would|can|could)\s+)*/i;

const DURATION_PHRASE = /\bfor (?:an?|one|two|three|four|five|six|half an|\d+(?:\.\d+)?) (?:hours?|minutes?|mins?)(?: and a half)?\b/gi;

/** The core phrase of a sentence for a title: no dates, durations, lead-ins or subordinate tail; at most 8 words. */
function coreClause(sentence: string): string[] {
  let core = stripWhen(expand(sentence).replace(/[“”"()[\]]/g, '')).replace(DURATION_PHRASE, '');
  for (let i = 0; i < 4; i++) core = clean(core).replace(TITLE_PRONOUN_LEAD, '').replace(TITLE_LEADS, '');
  // Drop a subordinate tail ("..., because ...") so the title stays a phrase.
  core = core.split(/,|;|\s+(?:because|since|so that|but|which|although)\s+|\s+and (?=i\b|we\b|my\b)/i)[0] ?? core;
  const words = clip(core.split(/\s+/).filter((w) => /[A-Za-z0-9]/.test(w)).map((w) => w.replace(/[.,!?;:]+$/, '')), 8);
  // Trailing small words make a title look cut off.
  while (words.length > 1 && (STOPWORDS.has(words.at(-1)!.toLowerCase()) || SMALL_WORDS.has(words.at(-1)!.toLowerCase()))) words.pop();
  return words;
}

export function makeTitle(sentences: readonly string[], category: ConversationCategory): string {
  for (const { sentence } of rankSentences(sentences)) {
    const words = coreClause(sentence);
    if (contentWords(words.join(' ')).length === 0) continue;
    return titleCase(clip(words, MAX_TITLE_WORDS));
  }
  const fallback = contentWords(sentences.join(' ')).slice(0, 3);
  if (fallback.length > 0) return titleCase([...fallback, 'Notes']);
  return category === 'other' ? 'Short Note' : `${titleCase([category])} Note`;
}

export function makeOverview(sentences: readonly string[]): string {
  const top = rankSentences(sentences).slice(0, 3).sort((a, b) => a.index - b.index);
  const parts: string[] = [];
  let length = 0;
  for (const { sentence } of top) {
    const s = capitalize(sentence.trim().replace(/[\s,;:-]+$/, ''));
    if (!s) continue;
    if (length > 0 && length + s.length > 400) break;
    parts.push(/[.!?]$/.test(s) ? s : `${s}.`);
    length += s.length;
  }
  const text = parts.join(' ');
  return text.length > 600 ? `${text.slice(0, 597)}...` : text;
}

function extractTask(sentence: string): string | undefined {
  const s = sentence.trim();
  if (s.endsWith('?')) return undefined;
  for (const lead of TASK_LEADS) {
    const m = lead.exec(s);
    if (!m?.[1]) continue;
    const rest = m[1];
    const first = tokenize(rest)[0] ?? '';
    // "I'll", "I'm going to", "let's" only count when a doing verb follows ("I'll be there" is not a task).
    if (/i(?:'ll| will)|going to|let/i.test(lead.source) && !IMPERATIVE_VERBS.has(first) && !/^(?:meet|go|start|talk|discuss|get|do|try|look|catch|have)$/.test(first)) continue;
    return rest;
  }
  const first = tokenize(s.replace(/^please\s+/i, ''))[0];
  if (first && IMPERATIVE_VERBS.has(first) && /^(?:please\s+)?[A-Za-z]/.test(s)) return s.replace(/^please\s+/i, '');
  return undefined;
}

export function extractActionItems(sentences: readonly string[], startedAt: string): ExtractedActionItem[] {
  const out: ExtractedActionItem[] = [];
  const seen = new Set<string>();
  for (const sentence of sentences) {
    const task = extractTask(sentence);
    if (!task) continue;
    const text = clean(task.replace(/\b(?:please|for me)\b/gi, ''));
    const words = clip(text.split(/\s+/).filter(Boolean), MAX_ACTION_ITEM_WORDS);
    if (words.length === 0) continue;
    const description = capitalize(words.join(' ').replace(/[,;:]+$/, ''));
    const key = tokenize(description).join(' ');
    if (seen.has(key)) continue;
    seen.add(key);
    const when = resolveWhen(sentence, startedAt);
    out.push({ description, dueAt: when?.start ?? null });
  }
  return out;
}

function eventTitle(sentence: string): string {
  const words = coreClause(sentence);
  return words.length > 0 && contentWords(words.join(' ')).length > 0 ? titleCase(words) : 'Event';
}

/** Reminders are tasks with a due time, not calendar events. */
const REMINDER = /\b(?:remind me|don't forget|do not forget|remember) to\b/i;

export function extractEvents(sentences: readonly string[], startedAt: string): ExtractedEvent[] {
  const out: ExtractedEvent[] = [];
  const seen = new Set<string>();
  for (const sentence of sentences) {
    if (sentence.trim().endsWith('?') || PAST.test(sentence) || REMINDER.test(sentence)) continue;
    const when = resolveWhen(sentence, startedAt);
    if (!when) continue;
    // A bare date ("tomorrow") makes a due date, not an event; an event needs a clock time or an event word.
    if (!when.hasClock && !EVENT_NOUNS.test(sentence)) continue;
    const title = eventTitle(sentence);
    const key = `${title.toLowerCase()}@${when.start}`;
    if (seen.has(key)) continue;
    seen.add(key);
    out.push({ title, description: capitalize(clean(sentence)), start: when.start, duration: Math.min(parseDurationMinutes(sentence) ?? 30, 180) });
  }
  return out;
}

/** Third person, present tense ("like" → "likes", "watch" → "watches", "study" → "studies"). */
function thirdPerson(verb: string): string {
  const v = verb.toLowerCase();
  if (v === 'have') return 'has';
  if (v === 'do') return 'does';
  if (/(?:s|sh|ch|x|z|o)$/.test(v)) return `${v}es`;
  if (/[^aeiou]y$/.test(v)) return `${v.slice(0, -1)}ies`;
  return `${v}s`;
}

/** Conjugates the leading verb of a clause ("go running" → "goes running"); "to ..." after "tend" stays. */
function conjugateFirst(clause: string): string {
  const [first, ...rest] = clause.split(' ');
  if (!first || first === 'to') return clause;
  return [thirdPerson(first), ...rest].join(' ');
}

/** Rewrites the rest of a first-person clause about the user ("my", "me", "I") into the third person. */
function toThird(rest: string): string {
  return rest
    .replace(/\bmyself\b/gi, 'themselves')
    .replace(/\bmy\b/gi, 'their')
    .replace(/\bmine\b/gi, 'theirs')
    .replace(/\bme\b/gi, 'them')
    .replace(/\bI'm\b/g, 'they are')
    .replace(/\bI\b/g, 'they');
}

const HOBBY_WORDS = /\b(\w+ing|hiking|running|cooking|painting|photography|chess|guitar|piano|yoga|gardening|fishing|camping|climbing|surfing|skiing|knitting|baking|dancing|cycling|swimming|gaming|reading|writing|drawing|singing|soccer|football|tennis|golf|basketball)\b/i;
const HABIT_WORDS = /\b(usually|always|every (?:day|morning|evening|night|week|weekend)|each (?:day|morning)|daily|often|never|tend to|routinely)\b/i;

const MEMORY_PATTERNS: ReadonlyArray<{ re: RegExp; build(m: RegExpExecArray): ExtractedMemory | undefined }> = [
  {
    re: /\bi (?:work|am working|'m working) (at|for|as|in|on) (.+)/i,
    build: (m) => ({ content: `User works ${m[1]!.toLowerCase()} ${toThird(m[2]!)}`, category: 'work' }),
  },
  {
    re: /\bi (?:live|am living|'m living) (in|on|at|near|with) (.+)/i,
    build: (m) => ({ content: `User lives ${m[1]!.toLowerCase()} ${toThird(m[2]!)}`, category: 'core' }),
  },
  {
    re: /\bi (?:am|'m) (?:learning|studying) (.+)/i,
    build: (m) => ({ content: `User is learning ${toThird(m[1]!)}`, category: 'learnings' }),
  },
  {
    re: /\bi (?:can speak|speak|know how to|can) (.+)/i,
    build: (m) => (/^(?:you|we|he|she|they|it|see|hear|tell|try|go|do|be|help|come)\b/i.test(m[1]!) ? undefined : { content: `User can ${toThird(m[1]!)}`, category: 'skills' }),
  },
  {
    re: /\bi (really |absolutely |totally )?(love|like|enjoy|adore|hate|dislike|prefer|can't stand) (.+)/i,
    build: (m) => {
      const verb = m[2]!.toLowerCase() === "can't stand" ? 'cannot stand' : thirdPerson(m[2]!);
      const what = m[3]!;
      if (/^(?:to think|that|it|this|you|how)\b/i.test(what)) return undefined;
      const category: MemoryCategory = HOBBY_WORDS.test(what) && !/hate|dislike|stand/i.test(m[2]!) ? 'hobbies' : 'interests';
      return { content: `User ${(m[1] ?? '').toLowerCase()}${verb} ${toThird(what)}`, category };
    },
  },
  {
    re: /\bmy ((?:(?!my\b)[a-z']+ ?){1,3}?) (is|are|was) (.+)/i,
    build: (m) => {
      const subject = m[1]!.toLowerCase();
      if (/^(?:point|guess|bad|question|problem|plan|idea|turn|pleasure)\b|\b(?:said|says|told|thinks|thought)\b/.test(subject)) return undefined;
      const category: MemoryCategory = /favou?rite|hobby/.test(subject) ? 'interests' : /job|boss|company|team|manager|role|title|salary|office/.test(subject) ? 'work' : 'core';
      return { content: `User's ${subject} ${m[2]!.toLowerCase()} ${toThird(m[3]!)}`, category };
    },
  },
  {
    re: /\bi (usually|always|often|never|tend to|normally) (.+)/i,
    build: (m) => ({ content: `User ${m[1]!.toLowerCase()} ${conjugateFirst(toThird(m[2]!))}`, category: 'habits' }),
  },
  {
    re: /\bi (?:am|'m) (?!going\b|gonna\b|not\b|sure\b|sorry\b|glad\b|just\b|fine\b|good\b|okay\b|here\b|there\b|on\b|at\b|in\b|so\b|really\b|trying\b|thinking\b|looking\b|calling\b|done\b)(.+)/i,
    build: (m) => {
      const rest = m[1]!;
      const category: MemoryCategory = /\b(engineer|developer|doctor|nurse|teacher|designer|manager|lawyer|accountant|student|founder|ceo|consultant|writer|scientist|chef|architect)\b/i.test(rest)
        ? 'work'
        : /\ballergic|vegetarian|vegan|diabetic\b/i.test(rest)
          ? 'lifestyle'
          : 'core';
      return { content: `User is ${toThird(rest)}`, category };
    },
  },
  {
    re: /\bi (go|run|walk|swim|meditate|exercise|read|cook|jog|bike|train|drink|eat|wake up|work out)\b(.*)/i,
    build: (m) => (HABIT_WORDS.test(m[2]!) ? { content: `User ${thirdPerson(m[1]!.split(' ')[0]!)}${m[1]!.includes(' ') ? ` ${m[1]!.split(' ').slice(1).join(' ')}` : ''}${toThird(m[2]!)}`, category: 'habits' } : undefined),
  },
];

/** Expands first-person contractions so one pattern covers "I'm" and "I am". */
const expand = (s: string): string => s.replace(/\bI'm\b/gi, 'I am').replace(/\bI've\b/gi, 'I have').replace(/\bwe're\b/gi, 'we are');

export function extractMemories(sentences: readonly string[]): ExtractedMemory[] {
  const out: ExtractedMemory[] = [];
  const seen = new Set<string>();
  for (const raw of sentences) {
    const sentence = expand(raw);
    if (sentence.trim().endsWith('?')) continue;
    // Only the clause that holds the fact: "Also, I love hiking, and ..." → "I love hiking".
    for (const clause of sentence.split(/[;,]\s*(?:and|but)?\s*|\s+(?:and|but) (?=i\b|my\b)/i)) {
      for (const p of MEMORY_PATTERNS) {
        const m = p.re.exec(clause);
        if (!m) continue;
        const memory = p.build(m);
        if (!memory) continue;
        let content = clean(memory.content);
        if (contentWords(content).length === 0 || content.split(/\s+/).length < 3) break;
        content = `${content.slice(0, MAX_MEMORY_CHARS - 1)}.`;
        const key = content.toLowerCase();
        if (!seen.has(key)) {
          seen.add(key);
          out.push({ content, category: memory.category });
        }
        break;
      }
      if (out.length >= MAX_MEMORIES) return out;
    }
  }
  return out;
}

export function emptyStructured(): Structured {
  return { title: '', overview: '', emoji: DISCARDED_EMOJI, category: 'other', actionItems: [], events: [] };
}

/** The whole transcript as one text, segments joined with spaces. */
export function transcriptText(input: ProcessInput): string {
  return input.segments.map((s) => s.text.trim()).filter(Boolean).join('\n');
}

/**
 * Decides whether a conversation is worth keeping, by the compatible system's rules: external texts are never
 * discarded, a transcript of more than 100 words always stays, an empty one goes, and a short one stays only when it
 * says something concrete.
 */
export function shouldDiscard(input: ProcessInput, text: string, concrete: boolean): boolean {
  if (!input.allowDiscard) return false;
  const words = tokenize(text);
  if (words.length === 0) return true;
  if (words.length > KEEP_WORDS) return false;
  if (concrete) return false;
  // Greetings and fillers only, or too little said to summarise.
  return informativeWordCount(text) < 4 || contentWords(text).length < 3;
}

export interface BuiltinProcessorOptions {
  /**
   * Transcripts of at least this many characters go to a worker thread of the processor's own, started with the first
   * of them (the service sets THREAD_FROM_CHARS). The extractor's CPU grows with the transcript, and on the main
   * thread that holds up every live session's audio for as long; a short one costs less than the hop to a thread and
   * back, and a thread started for short conversations would cost every node its memory.
   * @defaultValue Infinity: every transcript on the calling thread
   */
  threadFromChars?: number;
}

/** What the service sends to the thread: transcripts of about 150 segments and more (docs/performance.md). */
export const THREAD_FROM_CHARS = 10_000;

export class BuiltinProcessor implements ConversationProcessor {
  readonly #threadFromChars: number;
  #thread: TaskThread<BuiltinTask, ProcessResult> | undefined;
  #closed = false;

  constructor(opts: BuiltinProcessorOptions = {}) {
    this.#threadFromChars = opts.threadFromChars ?? Infinity;
  }

  async process(input: ProcessInput, signal?: AbortSignal): Promise<ProcessResult> {
    signal?.throwIfAborted();
    return this.run(input);
  }

  /** processBuiltin(), on the thread for a long transcript (the LLM processor's fallback runs here too). */
  run(input: ProcessInput, producedBy: ProcessResult['producedBy'] = 'builtin'): Promise<ProcessResult> {
    let chars = 0;
    for (const s of input.segments) chars += s.text.length;
    if (chars < this.#threadFromChars) return Promise.resolve(processBuiltin(input, producedBy));
    if (this.#closed) return Promise.reject(new Error('the built-in processor is closed'));
    this.#thread ??= new TaskThread<BuiltinTask, ProcessResult>(THREAD_HANDLER);
    return this.#thread.run({ input, producedBy });
  }

  /** Ends the thread; transcripts still on it are rejected, later long ones too. */
  async close(): Promise<void> {
    this.#closed = true;
    await this.#thread?.destroy();
  }
}

/** The thread's task handler (engine/processing/worker.ts). */
const THREAD_HANDLER = new URL('./worker.js', import.meta.url).href;

/** The synchronous body of the built-in processor (also the LLM processor's fallback). */
export function processBuiltin(input: ProcessInput, producedBy: ProcessResult['producedBy'] = 'builtin'): ProcessResult {
  const text = transcriptText(input);
  const sentences = input.segments.flatMap((s) => splitSentences(s.text));
  const actionItems = extractActionItems(sentences, input.startedAt);
  const events = extractEvents(sentences, input.startedAt);
  const memories = text.length >= MIN_MEMORY_TEXT_CHARS ? extractMemories(sentences) : [];
  const concrete = actionItems.length + events.length + memories.length > 0;
  if (shouldDiscard(input, text, concrete)) {
    return { discarded: true, structured: emptyStructured(), memories: [], producedBy };
  }
  const category = categorize(text);
  const structured: Structured = {
    title: makeTitle(sentences, category),
    overview: makeOverview(sentences) || 'No content.',
    emoji: CATEGORY_EMOJI[category],
    category,
    actionItems,
    events,
  };
  return { discarded: false, structured, memories, producedBy };
}
