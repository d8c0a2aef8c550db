// Word counting for usage: spaces for most languages, the ICU word segmenter for languages written without them.
import t from 'tap';
import { countWords } from '../../../engine/stt/usage.js';

t.test('counts words', async (t) => {
  t.equal(countWords('  The weather is nice today.  '), 5);
  t.equal(countWords(''), 0);
  t.equal(countWords(' \n\t '), 0);
  t.equal(countWords("c'est l'heure du déjeuner", 'fr'), 4);
  t.equal(countWords('今日はいい天気です', 'ja'), countWords('今日はいい天気です', 'ja-JP'), 'region subtags are ignored');
  t.ok(countWords('今日はいい天気です', 'ja') >= 3, 'Japanese is segmented, not one run of characters');
  t.equal(countWords('我们明天见。', 'zh'), countWords('我们明天见。', 'zh-TW'));
  t.ok(countWords('我们明天见。', 'zh') >= 2, 'punctuation is not a word');
});
