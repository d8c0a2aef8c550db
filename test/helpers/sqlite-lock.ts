// Another connection on a service's sqlite file that takes the write lock (BEGIN EXCLUSIVE) and lets it go (COMMIT):
// the store held back for real, as an outside writer or a slow disk would. The same connection runs other SQL too.
import path from 'node:path';
import sqlite3 from 'sqlite3';
import type { Test } from 'tap';

export interface WriteLock {
  hold(): Promise<void>;
  release(): Promise<void>;
  /** Runs SQL on the same connection (a trigger that refuses some writes, say). */
  exec(sql: string): Promise<void>;
}

/** A connection to `<dataDir>/service.sqlite`, closed at the test's teardown. */
export function sqliteWriteLock(t: Test, dataDir: string): WriteLock {
  const db = new sqlite3.Database(path.join(dataDir, 'service.sqlite'));
  t.teardown(() => new Promise<void>((r) => db.close(() => r())));
  const exec = (sql: string): Promise<void> => new Promise((resolve, reject) => db.exec(sql, (err) => (err ? reject(err) : resolve())));
  return { hold: () => exec('BEGIN EXCLUSIVE'), release: () => exec('COMMIT'), exec };
}
