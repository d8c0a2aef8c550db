// Runs `node bench/run.mjs <args>` from the repository root (bench/ is plain ESM, not compiled) and collects its output.
import { execFile } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';

// dist/test/helpers/ -> the repository root.
export const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const RUN = path.join(ROOT, 'bench/run.mjs');

export interface BenchRun {
  code: number;
  stdout: string;
  stderr: string;
}

// A bench run shares the box with the rest of the suite and can take several times its quiet duration: the file
// that runs benches gets more than the suite's per-file limit, and each run a bound well above its own length.
t.setTimeout(360_000);

export function runBench(args: string[], timeoutMs = 200_000): Promise<BenchRun> {
  return new Promise((resolve) => {
    execFile(process.execPath, [RUN, ...args], { cwd: ROOT, timeout: timeoutMs, maxBuffer: 16 * 1024 * 1024 }, (err, stdout, stderr) => {
      // A run stopped at its bound says so: its output alone would not tell a hang from a failure.
      const killed = err?.killed ? `\nbench run stopped after ${timeoutMs} ms (${err.signal})` : '';
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr: stderr + killed });
    });
  });
}
