// provider_b token → segment rules that the fake's scripts do not reach: labels, size cut, stray tokens; the audio tail bound.
import t from 'tap';
import { TokenSegmenter, speakerLabel } from '../../../../engine/stt/provider-b/segments.js';

const tok = (text: string, startMs: number, endMs: number, speaker?: string) => ({ text, start_ms: startMs, end_ms: endMs, is_final: true, speaker });

t.test('speaker labels count from 0; missing or odd speakers are SPEAKER_00', async (t) => {
  t.equal(speakerLabel('1'), 'SPEAKER_00');
  t.equal(speakerLabel('2'), 'SPEAKER_01');
  t.equal(speakerLabel('12'), 'SPEAKER_11');
  t.equal(speakerLabel(undefined), 'SPEAKER_00');
  t.equal(speakerLabel('x'), 'SPEAKER_00');
  t.equal(speakerLabel('0'), 'SPEAKER_00');
});

t.test('non-final, translated, untimed and whitespace-only tokens never make text', async (t) => {
  const seg = new TokenSegmenter();
  const r = seg.push([
    { text: 'maybe', start_ms: 0, end_ms: 100, is_final: false },
    { text: ' ', start_ms: 0, end_ms: 100, is_final: true },
    { text: 'hola', start_ms: 0, end_ms: 100, is_final: true, translation_status: 'translation' },
    { text: 'untimed', is_final: true },
    tok('real', 200, 400, '1'),
  ]);
  t.same(r, { segments: [], fins: 0 });
  t.same(seg.flush().map((s) => s.text), ['real']);
  t.same(seg.flush(), [], 'flush empties');
});

t.test('a segment is cut before it passes 4096 characters, and <fin> markers are counted', async (t) => {
  const seg = new TokenSegmenter();
  const word = ` ${'a'.repeat(99)}`; // 100 characters
  const tokens = Array.from({ length: 45 }, (_, i) => tok(word, i * 10, i * 10 + 10, '1'));
  const r = seg.push([...tokens, { text: '<fin>', is_final: true }, { text: '<fin>', is_final: true }]);
  t.equal(r.fins, 2);
  t.equal(r.segments.length, 2);
  t.ok(r.segments.every((s) => s.text.length <= 4096));
  t.equal(r.segments.map((s) => s.words!.length).reduce((a, b) => a + b), 45, 'no word lost or split');
});
