// How long deleting a large account takes in the store: one user with `--conversations` conversations of 100
// segments each, another with 50 that must stay; prints the rows erased and the time, on sqlite or PostgreSQL.
// `node bench/scripts/erase-account.mjs [--conversations 2000] [--store sqlite|pg]`
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';

const { values } = parseArgs({ options: { conversations: { type: 'string', default: '2000' }, store: { type: 'string', default: 'sqlite' } } });
const n = Number(values.conversations);
const pg = values.store === 'pg';
const dist = (/** @type {string} */ p) => import(new URL(`../../dist/${p}`, import.meta.url).href);
const { openStore } = await dist('engine/db/store.js');
const { ConversationsRepository } = await dist('engine/db/conversations.js');
const { eraseAccount } = await dist('engine/db/accounts.js');

const dataDir = mkdtempSync(path.join(tmpdir(), 'erase-account-'));
const schema = `bench_erase_${Date.now()}`;
const store = openStore({ dataDir, databaseUrl: pg ? 'postgres://postgres@127.0.0.1:5432/test' : undefined, databaseSchema: pg ? schema : 'public' });
try {
  await store.migrate();
  const k = store.knex;
  const conversations = new ConversationsRepository(k, () => Date.now());
  const segments = Array.from({ length: 100 }, (_, s) => ({ text: `segment ${s} of a long day of conversations`, start: s * 3, end: s * 3 + 2.5, speaker: 'SPEAKER_00', speakerId: 0, isUser: true }));
  for (const [uid, count] of /** @type {const} */ ([['leaving', n], ['staying', 50]])) {
    await k('users').insert({ id: uid, created_at: new Date().toISOString(), memory_access_enabled: false });
    for (let i = 0; i < count; i++) {
      const now = Date.now();
      await conversations.create({ userId: uid, status: 'completed', startedAt: new Date(now).toISOString(), finishedAt: new Date(now).toISOString(), source: 'omi', language: 'en', segments, now });
    }
  }
  const t0 = performance.now();
  const { rows } = await eraseAccount(k, 'leaving');
  const ms = performance.now() - t0;
  const [{ left }] = await k('conversation_segments').count('* as left');
  console.log(`${pg ? 'pg' : 'sqlite'}: ${rows} rows of ${n} conversations erased in ${ms.toFixed(0)} ms; the other user's ${left} segments left`);
} finally {
  if (pg) await store.knex.raw('drop schema if exists ?? cascade', [schema]).catch(() => undefined);
  await store.close();
  rmSync(dataDir, { recursive: true, force: true });
}
