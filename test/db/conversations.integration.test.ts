// The conversations repository as the live engine will use it: stub, segment appends and tail rewrites, status changes, result.
import t from 'tap';
import { openStore } from '../../engine/db/store.js';
import { UsersRepository } from '../../engine/db/users.js';
import { UNVERSIONED } from '../../engine/data-versions.js';
import { ConversationsRepository } from '../../engine/db/conversations.js';
import { processBuiltin } from '../../engine/processing/builtin.js';
import { STORES, storeEnv } from '../helpers/stores.js';

const NOW = Date.UTC(2026, 10, 23, 12, 0, 0);

for (const kind of STORES) {
  t.test(`conversations repository on ${kind}`, async (t) => {
    const env = storeEnv(t, kind);
    const store = openStore({ dataDir: t.testdir(), databaseUrl: env.DATABASE_URL, databaseSchema: env.DATABASE_SCHEMA ?? 'public' });
    t.teardown(() => store.close());
    await store.migrate();
    await new UsersRepository(store.knex, UNVERSIONED).ensure('u1', NOW);
    const repo = new ConversationsRepository(store.knex);

    const stub = await repo.create({ userId: 'u1', status: 'in_progress', startedAt: new Date(NOW).toISOString(), finishedAt: null, source: 'omi', language: 'en', now: NOW });
    t.match(stub, { status: 'in_progress', title: '', emoji: '🧠', category: 'other', discarded: false, actionItems: [], events: [], folderId: null });

    t.equal(await repo.appendSegments(stub.id, [{ text: 'Remind me to', start: 0, end: 0.6, speaker: 'SPEAKER_01' }], NOW + 600), 0);
    t.equal(await repo.appendSegments(stub.id, [{ text: 'buy', start: 0.6, end: 1.2 }, { text: 'milk', start: 1.2, end: 1.8, isUser: true }], NOW + 1200), 1);
    await repo.replaceSegmentsFrom(stub.id, 1, [{ text: 'buy milk tomorrow.', start: 0.6, end: 2.4 }], NOW + 1800);
    const segs = await repo.segments(stub.id);
    t.same(segs.map((x) => x.text), ['Remind me to', 'buy milk tomorrow.']);
    t.equal(segs[0]!.speakerId, 1, 'speaker number from the label');
    t.equal(segs[1]!.end, 2.4);

    // The live loop's write: only while in progress; the tail and the activity time move together.
    t.equal(await repo.replaceInProgressSegmentsFrom(stub.id, 2, [{ text: 'Thanks.', start: 2.5, end: 3 }], NOW + 1900), true);
    t.same((await repo.tailSegments(stub.id, 2)).segments.map((x) => x.text), ['buy milk tomorrow.', 'Thanks.']);
    t.equal((await repo.tailSegments(stub.id, 2)).base, 1, 'the tail starts at position 1');
    t.same(await repo.tailSegments('no-such-conversation', 5), { base: 0, segments: [] });
    t.equal((await repo.getById(stub.id))!.updatedAt, new Date(NOW + 1900).toISOString());
    const thanks = (await repo.segments(stub.id))[2]!;
    t.same((await repo.segmentsWithIds(stub.id, [thanks.id, 'nope'])).map((x) => x.text), ['Thanks.'], 'by id, unknown ids left out');
    await repo.replaceSegmentsFrom(stub.id, 2, [], NOW + 1950);

    await repo.setStatus(stub.id, 'processing', NOW + 2000, { finishedAt: new Date(NOW + 2400).toISOString() });
    t.equal((await repo.getById(stub.id))!.status, 'processing');
    t.equal(await repo.replaceInProgressSegmentsFrom(stub.id, 1, [{ text: 'late words', start: 3, end: 4 }], NOW + 2100), false, 'no live write once processing');
    t.same((await repo.segments(stub.id)).map((x) => x.text), ['Remind me to', 'buy milk tomorrow.'], 'nothing written');
    const result = processBuiltin({ segments: [{ text: segs.map((x) => x.text).join(' '), start: 0, end: 2.4 }], textSource: 'audio_transcript', language: 'en', startedAt: stub.startedAt, finishedAt: stub.startedAt, allowDiscard: true });
    await repo.saveResult(stub.id, result, NOW + 3000);
    const done = (await repo.get('u1', stub.id, { includeSegments: true }))!;
    t.equal(done.status, 'completed');
    t.equal(done.producedBy, 'builtin');
    t.match(done.actionItems, [{ description: /buy milk/i, conversation_id: stub.id, completed: false }]);
    t.equal(done.segments!.length, 2);
    t.equal(await repo.get('u2', stub.id), undefined, 'scoped to the owner');
    t.equal((await repo.list('u1', { limit: 10, offset: 0, includeSegments: false })).length, 1);
    await repo.setStatus(stub.id, 'failed', NOW + 4000);
    t.equal((await repo.list('u1', { limit: 10, offset: 0, includeSegments: false })).length, 0, 'only completed ones are listed');
  });
}
