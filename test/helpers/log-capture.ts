// Log capture for tests: a trace-level logger whose every line is kept in memory, and the suite-wide capture that
// LOG_SCAN_DIR turns on (every in-process test service then writes its trace logs to a file of its own there, for
// scripts/scan-logs.mjs). LOG_SCAN_DIR is read by the tests only; the service itself never sees it.
import fs from 'node:fs';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { pino } from 'pino';
import { createLogger, type Logger } from '../../engine/logger.js';

export interface CapturedLogs {
  logger: Logger;
  /** Every line written so far, one JSON record each. */
  lines: string[];
}

/** A logger at `trace` that keeps every line it writes. */
export function captureLogs(): CapturedLogs {
  const lines: string[] = [];
  let partial = '';
  const logger = createLogger('trace', {
    write(chunk: string) {
      const parts = (partial + chunk).split('\n');
      partial = parts.pop() ?? '';
      for (const p of parts) if (p !== '') lines.push(p);
    },
  });
  return { logger, lines };
}

/** With LOG_SCAN_DIR set: a trace logger writing synchronously to a new file in that directory; else undefined. */
export function suiteScanLogger(): Logger | undefined {
  const dir = process.env.LOG_SCAN_DIR;
  if (!dir) return undefined;
  fs.mkdirSync(dir, { recursive: true });
  const file = path.join(dir, `${path.basename(process.argv[1] ?? 'node')}-${process.pid}-${randomUUID().slice(0, 8)}.log`);
  // Synchronous writes: a test process may exit without flushing an asynchronous stream.
  return createLogger('trace', pino.destination({ dest: file, sync: true }));
}
