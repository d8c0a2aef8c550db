// Processing outcomes against a real server, Redis and store: bounded retries of a failing language model, the
// owner's reprocess, conversations a crash left in processing re-queued at start-up, and the completion event that
// says whether it is the first.
import t, { type Test } from 'tap';
import { Writable } from 'node:stream';
import { Queue, type Job } from 'bullmq';
import { Redis } from 'ioredis';
import { startService, type TestService } from '../../helpers/service.js';
import { bearer } from '../../helpers/http.js';
import { STORES } from '../../helpers/stores.js';
import { until, waitFor } from '../../helpers/until.js';
import { startFakeOpenAI, type FakeOpenAI } from '../../fakes/openai-server.js';
import { ConversationStatus } from '../../../engine/protocol.js';
import { createLogger } from '../../../engine/logger.js';
import { announceProcessed } from '../../../engine/jobs/process-conversation.js';
import { PROCESS_RETRY_DELAYS_MS, PROCESS_RETRY_JITTER, processRetryDelayMs } from '../../../engine/jobs/queues.js';

const LINES = [
  { text: 'I need to call the dentist tomorrow morning about my appointment.', start: 0, end: 3.5, speaker: 'SPEAKER_00', isUser: true },
  { text: 'Remember to buy milk and bread on the way home.', start: 4, end: 7, speaker: 'SPEAKER_01' },
];

const answer = (title: string) => ({
  kind: 'answer' as const,
  content: {
    discard: false,
    title,
    overview: 'A dentist call and groceries.',
    emoji: '🦷',
    category: 'health',
    action_items: [{ description: 'Call the dentist', due_at: null }],
    events: [],
    memories: [],
  },
});
const FAIL = { kind: 'status' as const, status: 500 };

interface Env {
  ts: TestService;
  fake: FakeOpenAI;
  queue: Queue;
  /** memory_created events published for live sessions, in order. */
  created: { conversationId: string; reprocess?: boolean }[];
}

/** A service whose processor is the LLM at a fake that fails until told otherwise, plus a view of its queue and events. */
async function setup(t: Test, opts: { store?: (typeof STORES)[number]; env?: Record<string, string>; sameDeploymentAs?: TestService } = {}): Promise<Env> {
  const fake = await startFakeOpenAI();
  t.teardown(() => fake.close());
  fake.fallback = FAIL;
  const ts = await startService(t, {
    ...(opts.store ? { store: opts.store } : {}),
    ...(opts.sameDeploymentAs ? { sameDeploymentAs: opts.sameDeploymentAs } : {}),
    env: { LLM_BASE_URL: fake.baseUrl, LLM_MAX_RETRIES: '0', LLM_TIMEOUT_MS: '5000', ...opts.env },
  });
  return { ts, fake, ...(await observe(t, ts)) };
}

async function observe(t: Test, ts: TestService): Promise<Pick<Env, 'queue' | 'created'>> {
  const url = ts.env.REDIS_URL!;
  const prefix = ts.env.REDIS_PREFIX!;
  const connection = new Redis(url, { maxRetriesPerRequest: null });
  const queue = new Queue('processing', { connection, prefix });
  const sub = new Redis(url);
  const created: Env['created'] = [];
  sub.on('message', (_channel: string, message: string) => {
    const e = JSON.parse(message) as { type: string; conversationId: string; reprocess?: boolean };
    if (e.type === 'memory_created') created.push({ conversationId: e.conversationId, reprocess: e.reprocess });
  });
  await sub.subscribe(`${prefix}:listen:events`);
  t.teardown(async () => {
    await queue.close();
    connection.disconnect();
    sub.disconnect();
  });
  return { queue, created };
}

/** A recorded conversation of `uid` stored in `status`, as a live session leaves it. */
async function stored(ts: TestService, uid: string, status: ConversationStatus): Promise<string> {
  const { conversations, users } = ts.service.services;
  const now = ts.clock.now();
  await users.ensure(uid, now, true);
  const c = await conversations.create({ userId: uid, status, startedAt: new Date(now).toISOString(), finishedAt: status === ConversationStatus.IN_PROGRESS ? null : new Date(now).toISOString(), source: 'omi', language: 'en', segments: LINES, now });
  return c.id;
}

/** A recorded conversation ended as a session or POST /v1/conversations ends it: `processing`, its job queued. */
async function ended(ts: TestService, uid: string): Promise<string> {
  const id = await stored(ts, uid, ConversationStatus.IN_PROGRESS);
  if ((await ts.service.services.lifecycle.end(id, uid)) !== 'processing') throw new Error('the conversation did not go to processing');
  return id;
}

const status = async (ts: TestService, id: string): Promise<string | undefined> => (await ts.service.services.conversations.getById(id))?.status;

/** Waits for the conversation's job to wait for its retry, and returns it. */
const delayed = (queue: Queue, id: string, attemptsMade: number): Promise<Job> =>
  waitFor(async () => {
    const job = await queue.getJob(id);
    return job && job.attemptsMade === attemptsMade && (await job.getState()) === 'delayed' ? job : undefined;
  }, { what: `retry ${attemptsMade} waiting`, timeoutMs: 15_000 });

t.test('the retry schedule: 30 s, 2 min, 10 min, 30 min, each up to 10% longer', async (t) => {
  t.same(PROCESS_RETRY_DELAYS_MS, [30_000, 120_000, 600_000, 1_800_000]);
  t.same([1, 2, 3, 4].map((n) => processRetryDelayMs(n, () => 0)), [30_000, 120_000, 600_000, 1_800_000]);
  t.same([1, 2, 3, 4].map((n) => processRetryDelayMs(n, () => 1)), PROCESS_RETRY_DELAYS_MS.map((d) => Math.round(d * (1 + PROCESS_RETRY_JITTER))));
});

for (const store of STORES) {
  t.test(`${store}: a model that fails twice: failed between attempts, completed with the model's answer after the retries`, async (t) => {
    const { ts, fake, queue, created } = await setup(t, { store });
    fake.script(FAIL, FAIL, answer('Dentist And Groceries'));
    const id = await ended(ts, 'u1');
    const auth = bearer(await ts.token('u1'));

    for (const [i, wait] of PROCESS_RETRY_DELAYS_MS.slice(0, 2).entries()) {
      const job = await delayed(queue, id, i + 1);
      t.ok(job.delay >= wait && job.delay <= wait * (1 + PROCESS_RETRY_JITTER), `retry ${i + 1} waits ${job.delay} ms`);
      const res = await ts.req(`/v1/conversations/${id}`, { headers: auth });
      t.equal(res.json.status, 'failed', 'the owner sees it failed while its retry waits');
      await job.promote(); // the backoff's time has come
    }
    await until(async () => (await status(ts, id)) === ConversationStatus.COMPLETED, { what: 'completed' });
    t.equal(fake.requests.length, 3, 'three attempts reached the model');
    const res = await ts.req(`/v1/conversations/${id}?include_transcript=true`, { headers: auth });
    t.equal(res.json.structured.title, 'Dentist And Groceries', "the model's structure, not the built-in fallback's");
    t.equal(res.json.transcript_segments.length, 2);
    await until(() => created.length === 1, { what: 'memory_created' });
    t.same(created, [{ conversationId: id, reprocess: false }], 'the first completion fires once, not as a reprocess');
  });

  t.test(`${store}: a model that always fails: failed after the last attempt, content kept; the owner's reprocess completes it`, async (t) => {
    const { ts, fake, queue, created } = await setup(t, { store });
    const id = await ended(ts, 'u1');
    for (let i = 1; i <= PROCESS_RETRY_DELAYS_MS.length; i++) await (await delayed(queue, id, i)).promote();
    const job = await waitFor(async () => {
      const j = await queue.getJob(id);
      return j && (await j.getState()) === 'failed' ? j : undefined;
    }, { what: 'the job failed for good' });
    t.equal(await job.getState(), 'failed', 'the job failed for good');
    t.equal(fake.requests.length, PROCESS_RETRY_DELAYS_MS.length + 1, 'five attempts, each reached the model once');
    t.equal(await status(ts, id), ConversationStatus.FAILED);
    const auth = bearer(await ts.token('u1'));
    const kept = await ts.req(`/v1/conversations/${id}?include_transcript=true`, { headers: auth });
    t.equal(kept.json.status, 'failed', 'visibly failed');
    t.same(kept.json.transcript_segments.map((s: { text: string }) => s.text), LINES.map((l) => l.text), 'no content lost');
    t.same(created, [], 'no memory_created for a failed conversation');

    fake.script(answer('Second Try'));
    const res = await ts.req(`/v1/conversations/${id}/reprocess`, { method: 'POST', headers: auth });
    t.equal(res.status, 200);
    t.equal(res.json.id, id);
    t.equal(res.json.status, 'processing', 'answers the conversation in its new state');
    await until(async () => (await status(ts, id)) === ConversationStatus.COMPLETED, { what: 'completed after reprocess' });
    await until(() => created.length === 1, { what: 'memory_created' });
    t.same(created, [{ conversationId: id, reprocess: false }], 'its first completion, though it came from a reprocess');
  });
}

t.test('reprocess: 404 for unknown or another user\'s, 409 while recording or processing, reprocess: true once completed', async (t) => {
  const { ts, fake, created } = await setup(t);
  const auth = bearer(await ts.token('u1'));
  const { conversations } = ts.service.services;
  const post = (id: string, headers = auth) => ts.req(`/v1/conversations/${id}/reprocess`, { method: 'POST', headers });

  fake.script(answer('First Title'));
  const id = await ended(ts, 'u1');
  await until(() => created.length === 1, { what: 'first completion announced' });
  const first = (await conversations.getById(id))!.firstProcessedAt;
  t.ok(first, 'the first completion is recorded');

  t.equal((await post('no-such-id')).status, 404);
  const other = await post(id, bearer(await ts.token('u2')));
  t.equal(other.status, 404, "another user's conversation is not found");
  t.equal(other.json.detail, 'Conversation not found');
  t.equal((await post(id, {})).status, 401, 'needs the ID token');

  const recording = await stored(ts, 'u1', ConversationStatus.IN_PROGRESS);
  const busy = await post(recording);
  t.equal(busy.status, 409, 'still recording');
  t.equal(busy.headers['x-error-code'], 'ENG_ERR_CONVERSATION_BUSY');
  t.match(busy.json.detail, /in_progress/);
  const running = await stored(ts, 'u1', ConversationStatus.PROCESSING);
  t.equal((await post(running)).status, 409, 'processing');
  t.equal(await status(ts, running), ConversationStatus.PROCESSING, 'left as it was');

  fake.script(answer('Second Title'));
  const res = await post(id);
  t.equal(res.status, 200);
  t.equal(res.json.status, 'processing');
  t.equal(res.json.structured.title, 'First Title', 'the stored result stays until the new one replaces it');
  await until(async () => (await status(ts, id)) === ConversationStatus.COMPLETED, { what: 'reprocessed' });
  t.equal((await conversations.getById(id))!.title, 'Second Title');
  await until(() => created.length === 2, { what: 'second memory_created' });
  t.same(created, [{ conversationId: id, reprocess: false }, { conversationId: id, reprocess: true }], 'the reprocess says it is one');
  t.equal((await conversations.getById(id))!.firstProcessedAt, first, 'the first completion time stays');

  // An upload is processed in the request (the model failing, by the built-in extractor) and announces nothing.
  const key = await ts.devKey('u1', ['conversations:write']);
  const upload = await ts.req('/v1/dev/user/conversations', { method: 'POST', headers: bearer(key), body: { text: 'Remember to call the dentist tomorrow about the appointment.' } });
  t.equal(upload.status, 200);
  t.equal(upload.json.status, 'completed');
  fake.script(answer('Uploaded Then Reprocessed'));
  t.equal((await post(upload.json.id)).status, 200);
  await until(() => created.length === 3, { what: 'memory_created of the reprocessed upload' });
  t.same(created[2], { conversationId: upload.json.id, reprocess: true }, 'an upload counts as completed once: its reprocess says so');
});

/** A debug logger whose lines the test reads. */
function captureLogger(): { logger: ReturnType<typeof createLogger>; lines: { msg: string }[] } {
  const lines: { msg: string }[] = [];
  const dest = new Writable({
    write(chunk, _enc, cb) {
      lines.push(JSON.parse(String(chunk)) as { msg: string });
      cb();
    },
  });
  return { logger: createLogger('debug', dest as never), lines };
}

for (const store of STORES) {
  t.test(`${store}: two jobs nodes starting together pick up what a crash left, once`, async (t) => {
    // A node that runs no jobs holds the deployment's store while the "crash" leaves conversations behind.
    const base = await setup(t, { store, env: { ROLE: 'api' } });
    const { conversations } = base.ts.service.services;
    const stuck = await stored(base.ts, 'u1', ConversationStatus.PROCESSING);
    // Completed, but the node died before announcing it.
    const unannounced = await stored(base.ts, 'u2', ConversationStatus.PROCESSING);
    await conversations.saveResult(unannounced, { structured: { title: 'Done Before', overview: '', emoji: '🧠', category: 'other', actionItems: [], events: [] }, memories: [], discarded: false, producedBy: 'builtin' }, base.ts.clock.now());
    base.fake.script(answer('Recovered'));
    base.fake.fallback = answer('Recovered Twice');
    const env = { ROLE: 'jobs', LLM_BASE_URL: base.fake.baseUrl };
    const logs = [captureLogger(), captureLogger()];
    await Promise.all(logs.map(({ logger }) => startService(t, { sameDeploymentAs: base.ts, env, logger })));
    await until(() => logs.every(({ lines }) => lines.some((l) => l.msg === 'start-up scan of conversations left behind done')), { what: 'both start-up scans' });
    await until(async () => (await status(base.ts, stuck)) === ConversationStatus.COMPLETED, { what: 'the stuck conversation processed' });
    await until(() => base.created.length === 2, { what: 'memory_created for both', timeoutMs: 5000 }).catch((err: Error) => {
      throw new Error(`${err.message}: ${JSON.stringify(base.created)} stuck ${stuck}`);
    });
    t.equal((await conversations.getById(stuck))!.title, 'Recovered');
    t.same(
      [...base.created].sort((a, b) => (a.conversationId === stuck ? -1 : b.conversationId === stuck ? 1 : 0)),
      [{ conversationId: stuck, reprocess: false }, { conversationId: unannounced, reprocess: false }],
      'each announced once, as a first completion',
    );
    t.ok((await conversations.getById(unannounced))!.firstProcessedAt, 'the announcement recorded');
    t.equal((await conversations.getById(unannounced))!.title, 'Done Before', 'not processed again');
    await until(async () => (await base.queue.getJobCounts('active')).active === 0, { what: 'queue idle' });
    t.same(await base.queue.getJobCounts('waiting', 'active', 'delayed'), { waiting: 0, active: 0, delayed: 0 }, 'no run still pending');
    t.equal(base.fake.requests.length, 1, 'processed once');
  });
}

t.test('a completion is published before it is recorded as announced, and not recorded when Redis did not take it', async (t) => {
  const { ts } = await setup(t, { env: { ROLE: 'api' } });
  const s = ts.service.services;
  const id = await stored(ts, 'u1', ConversationStatus.PROCESSING);
  await s.conversations.saveResult(id, { structured: { title: 'Done', overview: '', emoji: '🧠', category: 'other', actionItems: [], events: [] }, memories: [], discarded: false, producedBy: 'builtin' }, ts.clock.now());
  const event = { conversationId: id, uid: 'u1', reprocess: false, discarded: false };

  await announceProcessed(s, { publish: () => Promise.reject(new Error('connection closed')) }, event);
  t.equal((await s.conversations.getById(id))!.firstProcessedAt, null, 'not published: left for the next run to announce');

  const recordedAtPublish: (string | null)[] = [];
  await announceProcessed(s, { publish: async () => void recordedAtPublish.push((await s.conversations.getById(id))!.firstProcessedAt) }, event);
  t.same(recordedAtPublish, [null], 'published while not yet recorded: a crash between the two announces it again');
  t.ok((await s.conversations.getById(id))!.firstProcessedAt, 'recorded once published');
});

t.test('a conversation deleted while the model works on it is not written back: no memories, action items or event', async (t) => {
  const { ts, fake, queue, created } = await setup(t);
  let answerNow!: () => void;
  fake.script({ kind: 'later', until: new Promise<void>((r) => (answerNow = r)), content: { ...answer('Too Late').content, memories: [{ content: 'Goes to the dentist', category: 'core' }] } });
  const id = await ended(ts, 'u-gone');
  await until(() => fake.requests.length === 1, { what: 'the model asked' });
  const key = await ts.devKey('u-gone', ['conversations:write']);
  t.equal((await ts.req(`/v1/dev/user/conversations/${id}`, { method: 'DELETE', headers: bearer(key) })).status, 200, 'deleted by its owner meanwhile');
  answerNow();
  await waitFor(async () => ((await queue.getJobCounts('active', 'waiting', 'delayed')).active === 0 ? true : undefined), { what: 'the job to finish' });
  const { memories, actionItems } = ts.service.services;
  t.same(await memories.list('u-gone', { limit: 10, offset: 0 }), [], 'no memory of it');
  t.same(await actionItems.list('u-gone', { limit: 10, offset: 0 }), [], 'no action item of it');
  t.equal(await ts.service.services.conversations.getById(id), undefined, 'it stays deleted');
  t.same(created, [], 'and no session is told it was created');
});
