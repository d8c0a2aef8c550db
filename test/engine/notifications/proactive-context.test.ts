// The pure parts of proactive notifications: the lexical ranking behind {{user_context}} and the cut of long text.
import t from 'tap';
import { bm25, words } from '../../../engine/notifications/context.js';
import { cut } from '../../../engine/notifications/proactive.js';

t.test('words: letters and digits of any script, lower-cased, one-letter words left out', async (t) => {
  t.same(words('I need the Dentist at 9:30, São Paulo — 東京!'), ['need', 'the', 'dentist', 'at', '30', 'são', 'paulo', '東京']);
});

t.test('bm25 ranks the document sharing the most query words first and leaves out those sharing none', async (t) => {
  const docs = [words('Garden plans: planting tomatoes'), words('Call with the dentist about the check-up'), words('The weekly team call'), words('Dentist dentist appointment')];
  t.same(bm25(words('call the dentist'), docs), [1, 2, 3]);
  t.same(bm25(words('dentist'), docs), [3, 1], 'more occurrences in a shorter text rank higher');
  t.same(bm25(words('nothing shared'), docs), []);
  t.same(bm25(['x'], []), []);
});

t.test('cut keeps text within the bound, marking the cut with "..." and never splitting a character', async (t) => {
  t.equal(cut('short', 10), 'short');
  t.equal(cut('exactly ten', 11), 'exactly ten');
  t.equal(cut('one two three four', 10), 'one two...');
  t.equal(cut('😀😀😀😀😀😀', 5), '😀😀...');
});
