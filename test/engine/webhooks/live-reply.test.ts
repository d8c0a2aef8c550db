// Which replies of a live transcript endpoint are kept: a message of more than five characters (a push), a
// notification with a prompt (a proactive notification); nothing else.
import t from 'tap';
import { replyKind } from '../../../engine/webhooks/live-transcript.js';

const kind = (v: unknown) => replyKind(Buffer.from(typeof v === 'string' ? v : JSON.stringify(v)));

t.test('messages longer than five characters and notifications with a prompt ask for something', async (t) => {
  t.equal(kind({ message: 'Drink some water' }), 'message');
  t.equal(kind({ message: 'Hello' }), undefined, 'five characters are not enough');
  t.equal(kind({ message: '   Hello   ' }), undefined, 'spaces do not count');
  t.equal(kind({ session_id: 's1', notification: { prompt: 'Tell {{user_name}} to rest', params: ['user_name'] } }), 'notification');
  t.equal(kind({ session_id: 's1', notification: { prompt: '' } }), undefined, 'an empty prompt');
  t.equal(kind({ session_id: 's1' }), undefined, 'no notification');
  t.equal(kind([{ message: 'Drink some water' }]), undefined, 'an array');
  t.equal(kind('not json'), undefined);
  t.equal(kind(''), undefined);
});
