// The conversations repository as the live engine will use it: stub, segment appends and tail rewrites, status changes, result.
import t from 'tap';
import { UsersRepository } from '../../../engine/db/users.js';
import { UNVERSIONED } from '../../../engine/cache/data-versions.js';
import { ConversationsRepository, type ConversationRecord } from '../../../engine/db/conversations.js';
import { processBuiltin } from '../../../engine/processing/builtin.js';
import { STORES, openTestStore } from '../../helpers/stores.js';

const NOW = Date.UTC(2026, 10, 23, 12, 0, 0);

for (const kind of STORES) {
  t.test(`conversations repository on ${kind}`, async (t) => {
    const store = openTestStore(t, kind);
    await store.migrate();
    await new UsersRepository(store.knex, UNVERSIONED).ensure('u1', NOW);
    const repo = new ConversationsRepository(store.knex);

    const stub = await repo.create({ userId: 'u1', status: 'in_progress', startedAt: new Date(NOW).toISOString(), finishedAt: null, source: 'omi', language: 'en', now: NOW });
    t.match(stub, { status: 'in_progress', title: '', emoji: '🧠', category: 'other', discarded: false, actionItems: [], events: [], folderId: null });
    t.equal(await repo.hasContent(stub.id), false, 'nothing said yet: ending it keeps nothing');
    const photoOnly = await repo.create({ userId: 'u1', status: 'in_progress', startedAt: new Date(NOW).toISOString(), finishedAt: null, source: 'omi', language: 'en', now: NOW });
    await repo.addPhoto(photoOnly.id, new Uint8Array([0xff, 0xd8, 0xff, 0xe0, 0, 0x10]), NOW);
    t.equal(await repo.hasContent(photoOnly.id), true, 'a photo alone is content');
    t.equal(await repo.photoCount(photoOnly.id), 1);

    t.equal(await repo.appendSegments(stub.id, [{ text: 'Remind me to', start: 0, end: 0.6, speaker: 'SPEAKER_01' }], NOW + 600), 0);
    t.equal(await repo.hasContent(stub.id), true, 'a segment is content');
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

  t.test(`tail writes that queue up together, on ${kind}`, async (t) => {
    const store = openTestStore(t, kind);
    await store.migrate();
    await new UsersRepository(store.knex, UNVERSIONED).ensure('u1', NOW);
    const repo = new ConversationsRepository(store.knex);
    const open = () => repo.create({ userId: 'u1', status: 'in_progress', startedAt: new Date(NOW).toISOString(), finishedAt: null, source: 'omi', language: 'en', now: NOW });
    const convs: ConversationRecord[] = [];
    for (let i = 0; i < 6; i++) {
      const c = await open();
      await repo.appendSegments(c.id, [0, 1, 2].map((k) => ({ text: `old ${i}.${k}`, start: k, end: k + 1 })), NOW);
      convs.push(c);
    }
    // Ended elsewhere while its session still writes: its write must change nothing.
    await repo.setStatus(convs[2]!.id, 'processing', NOW + 10);
    const texts = async (id: string) => (await repo.segments(id)).map((x) => x.text);
    let statements = 0;
    const tailTexts = new Set<string>();
    store.knex.on('query', (q: { sql: string }) => {
      statements++;
      if (/^(UPDATE conversations SET updated_at|DELETE FROM conversation_segments|INSERT INTO conversation_segments)/.test(q.sql)) tailTexts.add(q.sql);
    });

    type Seg = { text: string; start: number; end: number; speaker?: string };
    const live = (i: number, position: number, segs: Seg[], at: number) => repo.replaceInProgressSegmentsFrom(convs[i]!.id, position, segs, NOW + at);
    const always = (i: number, position: number, segs: Seg[], at: number) => repo.replaceSegmentsFrom(convs[i]!.id, position, segs, NOW + at);
    /** `first` runs alone; `queued`, submitted while it runs, share the next transaction. Answers first's and their results. */
    const behind = async (first: Promise<unknown>, ...queued: Promise<unknown>[]) => [await first, ...(await Promise.all(queued))];

    t.same(
      await behind(
        live(0, 3, [{ text: 'first', start: 3, end: 4 }], 100),
        live(1, 1, [{ text: 'a', start: 1, end: 2 }, { text: 'b', start: 2, end: 3 }], 101),
        live(3, 2, [], 102),
        live(4, 0, [{ text: 'all new', start: 0, end: 9, speaker: 'SPEAKER_02' }], 103),
        always(5, 3, [{ text: 'appended', start: 3, end: 4 }], 104),
      ),
      [true, true, true, true, undefined],
      'every live write to an open conversation is written',
    );
    const together = statements;
    t.same(await texts(convs[0]!.id), ['old 0.0', 'old 0.1', 'old 0.2', 'first']);
    t.same(await texts(convs[1]!.id), ['old 1.0', 'a', 'b'], 'replaced from position 1');
    t.same(await texts(convs[3]!.id), ['old 3.0', 'old 3.1'], 'an empty tail deletes from its position');
    t.same(await texts(convs[4]!.id), ['all new']);
    t.equal((await repo.segments(convs[4]!.id))[0]!.speakerId, 2);
    t.same(await texts(convs[5]!.id), ['old 5.0', 'old 5.1', 'old 5.2', 'appended']);
    for (const [i, at] of [[1, 101], [3, 102], [4, 103], [5, 104]] as const) {
      t.equal((await repo.getById(convs[i]!.id))!.updatedAt, new Date(NOW + at).toISOString(), `conversation ${i} has its own write's time`);
    }
    // Two transactions of BEGIN, writes, COMMIT: the four queued writes took a handful of statements, not four each.
    t.ok(together <= 2 * 2 + 3 + 4, `5 tail writes took ${together} statements`);

    // A group with a write to an ended conversation.
    t.same(
      await behind(
        live(0, 4, [{ text: 'x', start: 4, end: 5 }], 200),
        live(2, 0, [{ text: 'late words', start: 0, end: 1 }], 201),
        live(1, 3, [{ text: 'c', start: 3, end: 4 }], 202),
        always(5, 0, [{ text: 'kept audio', start: 0, end: 4 }], 203),
      ),
      [true, false, true, undefined],
      'only the ended conversation refuses the write',
    );
    // A group with two writes to one conversation: in order.
    t.same(
      await behind(
        live(3, 2, [{ text: 'w', start: 2, end: 3 }], 300),
        live(0, 5, [{ text: 'y', start: 5, end: 6 }], 301),
        live(4, 1, [{ text: 'v', start: 9, end: 10 }], 302),
        live(0, 5, [{ text: 'z', start: 5, end: 6 }], 303),
      ),
      [true, true, true, true],
    );
    t.same(await texts(convs[3]!.id), ['old 3.0', 'old 3.1', 'w']);
    t.same(await texts(convs[4]!.id), ['all new', 'v']);
    t.same(await texts(convs[2]!.id), ['old 2.0', 'old 2.1', 'old 2.2'], 'the ended conversation is untouched');
    t.equal((await repo.getById(convs[2]!.id))!.updatedAt, new Date(NOW + 10).toISOString());
    t.same(await texts(convs[1]!.id), ['old 1.0', 'a', 'b', 'c']);
    t.same(await texts(convs[5]!.id), ['kept audio']);
    t.same(await texts(convs[0]!.id), ['old 0.0', 'old 0.1', 'old 0.2', 'first', 'x', 'z'], 'the later write to one conversation wins');
    // sqlite keeps every statement text prepared on each connection: groups of 1 to 4 writes and 0 to 2 segments each
    // use one text per kind of statement (two activity-time updates: live writes, and the others).
    if (kind === 'sqlite') t.equal(tailTexts.size, 4, `tail writes of every size took ${tailTexts.size} statement texts`);
  });
}

for (const kind of STORES) {
  t.test(`many conversations with their segments read together on ${kind}: the segments exactly as one by one`, async (t) => {
    const store = openTestStore(t, kind);
    await store.migrate();
    await new UsersRepository(store.knex, UNVERSIONED).ensure('u1', NOW);
    const repo = new ConversationsRepository(store.knex);
    const texts = ['say "hi"\n\tthen \\ leave', 'tab\there \u2028 line', 'émoji 🎧 ✓', 'plain'];
    const created: ConversationRecord[] = [];
    for (let c = 0; c < 3; c++) {
      created.push(
        await repo.create({
          userId: 'u1', status: 'completed', startedAt: new Date(NOW).toISOString(), finishedAt: new Date(NOW).toISOString(), source: 'omi', language: 'en', now: NOW,
          // Times that 15 significant digits would not give back (0.1 + 0.2, a third), in more positions than 9.
          segments: Array.from({ length: 3 + c * 5 }, (_, k) => ({ text: texts[k % texts.length]!, start: k * (0.1 + 0.2), end: k / 3 + 1e-9, speaker: `SPEAKER_0${k % 3}`, isUser: k % 2 === 0, ...(k === 1 ? { personId: 'p1' } : {}) })),
        }),
      );
    }
    const empty = await repo.create({ userId: 'u1', status: 'completed', startedAt: new Date(NOW).toISOString(), finishedAt: null, source: 'omi', language: 'en', now: NOW });
    const first = (await repo.segments(created[0]!.id))[0]!;
    await repo.updateSegmentTranslations(created[0]!.id, [{ id: first.id, text: first.text, translations: [{ lang: 'de', text: 'sag „hallo“' }] }]);
    await repo.addAppResult(created[1]!.id, { app_id: 'app1', content: 'Saved "it"' });
    await repo.saveResult(created[2]!.id, processBuiltin({ segments: [{ text: 'Call Bob tomorrow about the offsite.', start: 0, end: 2 }], textSource: 'audio_transcript', language: 'en', startedAt: created[2]!.startedAt, finishedAt: created[2]!.startedAt, allowDiscard: false }), NOW + 5);
    const many = await repo.getManyWithSegments([...created, empty].map((c) => ({ userId: 'u1', id: c.id })));
    for (const c of [...created, empty]) {
      t.strictSame(many.get(c.id)?.segments, await repo.segments(c.id), `conversation of ${c.segments?.length ?? 0} segments`);
      t.strictSame(many.get(c.id), await repo.get('u1', c.id, { includeSegments: true }), 'the whole record as read on its own');
    }
    t.same([...(await repo.getManyWithSegments([{ userId: 'u2', id: created[0]!.id }])).keys()], [], "another user's conversation is not found");
    t.equal(many.get(created[0]!.id)!.segments![0]!.translations?.[0]?.text, 'sag „hallo“');
  });
}
