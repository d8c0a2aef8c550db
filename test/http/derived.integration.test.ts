// A processed conversation leaves its memories and action items as standalone records the developer API serves.
import t from 'tap';
import { startService } from '../helpers/service.js';
import { bearer } from '../helpers/http.js';
import { STORES } from '../helpers/stores.js';

const TEXT =
  'I need to call the dentist tomorrow at 3pm about my appointment. We should also send the quarterly report to Maria by Friday. ' +
  'By the way, I love hiking in the mountains and I work at a small robotics company in Lisbon.';

for (const store of STORES) {
  t.test(`derived records on ${store}`, async (t) => {
    const s = await startService(t, { store });
    const key = await s.devKey('erin', ['conversations:read', 'conversations:write', 'memories:read', 'action_items:read']);
    const created = await s.req('/v1/dev/user/conversations', { method: 'POST', headers: bearer(key), body: { text: TEXT, text_source: 'audio_transcript' } });
    t.equal(created.status, 200);
    t.match(created.json, { id: String, status: 'completed', discarded: false });
    const id = created.json.id as string;

    const items = await s.req('/v1/dev/user/action-items', { headers: bearer(key) });
    t.equal(items.status, 200);
    const mine = items.json.filter((i: { conversation_id: string }) => i.conversation_id === id);
    t.ok(mine.length >= 2, 'both tasks became action items');
    t.ok(mine.some((i: { description: string }) => /dentist/i.test(i.description)));
    t.ok(mine.some((i: { description: string }) => /report/i.test(i.description)));
    t.ok(mine.every((i: { completed: boolean }) => i.completed === false));

    const memories = await s.req('/v1/dev/user/memories', { headers: bearer(key) });
    t.equal(memories.status, 200);
    t.ok(memories.json.some((m: { content: string }) => /hiking/i.test(m.content)), 'a first-person fact became a memory');

    const conv = await s.req(`/v1/dev/user/conversations/${id}`, { headers: bearer(key) });
    t.equal(conv.json.structured.action_items.length, mine.length, 'the conversation and the standalone list agree');

    // Processing the same conversation again (as a retried job would) replaces, never duplicates.
    const { afterProcessed } = await import('../../engine/conversations/derived.js');
    const again = await s.service.services.processor.process({
      segments: [{ text: TEXT, start: 0, end: 30 }],
      textSource: 'audio_transcript',
      language: 'en',
      startedAt: new Date(s.clock.now()).toISOString(),
      finishedAt: new Date(s.clock.now() + 30_000).toISOString(),
      allowDiscard: false,
    });
    await afterProcessed(s.service.services, 'erin', id, again);
    const after = await s.req('/v1/dev/user/action-items', { headers: bearer(key) });
    t.equal(after.json.filter((i: { conversation_id: string }) => i.conversation_id === id).length, mine.length, 'no duplicates');

    const del = await s.req(`/v1/dev/user/conversations/${id}`, { method: 'DELETE', headers: bearer(key) });
    t.same(del.json, { success: true });
  });
}
