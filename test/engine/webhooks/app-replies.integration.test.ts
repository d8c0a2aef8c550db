// An installed app's reply to conversation-created reaches the user's live session in memory_created.messages when the
// session is on another node than the jobs that deliver it, and stays on the conversation for later bodies.
import t from 'tap';
import { startService } from '../../helpers/service.js';
import { open, sendAndStep, advance } from '../../helpers/listen.js';
import { until } from '../../helpers/until.js';
import { installedApp, receiver, setUserHook, verified, secretOf } from '../../helpers/webhooks.js';

const LINES = [
  { text: 'I need to call the dentist tomorrow morning about my appointment.', speaker: 'SPEAKER_00', speaker_id: 0, is_user: true, person_id: null, start: 0, end: 3.5 },
  { text: 'Remember to buy milk and bread on the way home.', speaker: 'SPEAKER_01', speaker_id: 1, is_user: false, person_id: null, start: 4, end: 7 },
];

t.test('an app reply rides in memory_created on the listen node; later bodies carry it in apps_response', async (t) => {
  const listenNode = await startService(t, { env: { ROLE: 'listen', WEBHOOK_ALLOW_PRIVATE: 'on' } });
  const jobsNode = await startService(t, { sameDeploymentAs: listenNode, env: { ROLE: 'jobs' } });
  const app = await receiver(t, (_q, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ message: 'Saved to your notes: call the dentist.' })));
  const appId = await installedApp(listenNode, 'dev', 'u1', app.url);

  const c = await open(listenNode, { uid: 'u1', custom_stt: 'enabled', conversation_timeout: '30' });
  await c.ready();
  const actor = listenNode.service.sessions.sessionsOf('u1')[0]!;
  await sendAndStep(listenNode, c, actor, JSON.stringify({ type: 'suggested_transcript', stt_provider: 'app', segments: LINES }));
  const id = actor.conversationId!;
  await advance(listenNode, 30_000);
  const created = await c.json((m) => m.type === 'memory_created', 20_000);
  t.equal(created.memory.id, id);
  t.same(created.messages, [{ id: `${id}:${appId}`, text: 'Saved to your notes: call the dentist.', sender: 'ai', app_id: appId, type: 'text' }], "the app's reply");
  t.equal(app.received.length, 1);
  t.equal(verified(app.received[0]!, await secretOf(jobsNode, 'app', appId)).id, id);

  // A developer webhook saved afterwards, and a reprocess: its body carries the stored reply.
  const dev = await receiver(t);
  await setUserHook(listenNode, 'u1', dev.url);
  await jobsNode.service.services.webhookQueue.enqueueConversationCreated('u1', id, { reprocess: true, discarded: false });
  await until(() => dev.received.length === 1, { what: 'the developer delivery' });
  t.same(verified(dev.received[0]!, await secretOf(jobsNode, 'user', 'u1')).apps_response, [{ app_id: appId, content: 'Saved to your notes: call the dentist.' }]);
  c.close();
});
