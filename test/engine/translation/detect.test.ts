// The offline language guess on transcript-like sentences: it must never call a foreign sentence English (that segment
// would go untranslated), may say "unknown" (the model then decides), and costs microseconds.
import t from 'tap';
import { detectLanguage, primaryLanguage } from '../../../engine/translation/detect.js';

const CORPUS: Record<string, string[]> = {
  en: [
    'I think that is a great idea.',
    'What are you doing this weekend?',
    'We have to finish the report before Friday.',
    'I don’t know, maybe we should ask her about it.',
    'It was a long day at the office and I am tired.',
    'Can you send me the link to the meeting?',
    'They said the train would be late again.',
    'Yes, I will call you back in ten minutes.',
  ],
  es: [
    'Hola, ¿cómo estás? Estoy muy bien.',
    'Mañana tengo que ir al médico por la tarde.',
    '¿Dónde está la estación de tren?',
    'No sé, pero creo que es una buena idea.',
    'Vamos a comer con mis padres el domingo.',
    'El proyecto está casi terminado.',
  ],
  fr: [
    'Bonjour, je suis très content de vous voir.',
    "C'est une bonne idée, mais nous n'avons pas le temps.",
    'Il fait beau aujourd’hui, on va à la plage ?',
    'Je ne sais pas où sont mes clés.',
    'Nous avons une réunion demain matin.',
  ],
  de: [
    'Ich weiß nicht, ob er heute kommt.',
    'Das ist eine sehr gute Idee.',
    'Wir haben morgen einen Termin beim Arzt.',
    'Kannst du mir bitte das Salz geben?',
    'Es ist schon spät, ich gehe jetzt nach Hause.',
  ],
  it: ['Ciao, come stai? Io sto bene, grazie.', 'Domani abbiamo una riunione molto importante.', 'Non so dove sono le chiavi della macchina.', 'Questo è il mio amico Marco.'],
  pt: ['Olá, tudo bem? Eu estou muito bem, obrigado.', 'Amanhã não vou trabalhar porque estou doente.', 'Você sabe onde fica a estação?', 'Isso é muito importante para nós.'],
  nl: ['Ik weet niet waar mijn sleutels zijn.', 'Het is een mooie dag vandaag.', 'We hebben morgen een vergadering op kantoor.', 'Dank je wel, dat is heel aardig.'],
  ja: ['今日はとても暑いですね。', '明日の会議は何時からですか？'],
  zh: ['我们明天去北京开会。', '这个问题很重要。'],
  ko: ['오늘 날씨가 정말 좋네요.', '내일 회의는 몇 시에 시작해요?'],
  ru: ['Привет, как дела? У меня всё хорошо.', 'Завтра у нас важная встреча.'],
  uk: ['Привіт, як справи? Дякую, все добре.'],
  ar: ['مرحبا، كيف حالك اليوم؟'],
  hi: ['आज मौसम बहुत अच्छा है।'],
  el: ['Καλημέρα, τι κάνεις σήμερα;'],
};

t.test('corpus: right or unknown, never a foreign sentence taken for English', async (t) => {
  let right = 0;
  let unknown = 0;
  let total = 0;
  const wrong: string[] = [];
  for (const [lang, sentences] of Object.entries(CORPUS)) {
    for (const s of sentences) {
      total++;
      const got = detectLanguage(s);
      if (got === lang) right++;
      else if (got === undefined) unknown++;
      else wrong.push(`${lang} → ${got}: ${s}`);
      if (lang !== 'en') t.not(got, 'en', `not English: ${s}`);
    }
  }
  t.comment(`detection over ${total} sentences: ${right} right, ${unknown} unknown (left to the model), ${wrong.length} wrong ${JSON.stringify(wrong)}`);
  t.ok(right / total >= 0.85, `at least 85% right (${right}/${total})`);
  t.ok(wrong.length <= 2, 'at most two wrong');
  t.ok(CORPUS.en!.every((s) => detectLanguage(s) === 'en'), 'every English sentence is skipped without a request');
});

t.test('too little to tell: unknown', async (t) => {
  for (const s of ['Okay.', '', '123 456', 'Mm-hmm.', 'Marco!']) t.equal(detectLanguage(s), undefined, JSON.stringify(s));
});

t.test('primary subtag', async (t) => {
  t.equal(primaryLanguage('pt-BR'), 'pt');
  t.equal(primaryLanguage('EN_us'), 'en');
  t.equal(primaryLanguage('multi'), 'multi');
});

t.test('cost per sentence', async (t) => {
  const all = Object.values(CORPUS).flat();
  for (let i = 0; i < 2_000; i++) detectLanguage(all[i % all.length]!); // warm-up
  const n = 20_000;
  const before = process.cpuUsage();
  for (let i = 0; i < n; i++) detectLanguage(all[i % all.length]!);
  const used = process.cpuUsage(before);
  const us = (used.user + used.system) / n;
  t.comment(`detectLanguage: ${us.toFixed(2)} µs CPU per sentence (mean over ${n}, ${all.length} sentences of ${Math.round(all.join('').length / all.length)} characters)`);
  t.ok(us < 1_000, 'well under a millisecond');
});
