// A child process's JSON log lines, one object per complete line; lines that are not JSON are skipped.
import type { Readable } from 'node:stream';

export function onJsonLines(stream: Readable, fn: (line: Record<string, unknown>) => void): void {
  let buf = '';
  stream.on('data', (d: Buffer) => {
    buf += d.toString();
    let i: number;
    while ((i = buf.indexOf('\n')) >= 0) {
      const text = buf.slice(0, i);
      buf = buf.slice(i + 1);
      let line: Record<string, unknown>;
      try {
        line = JSON.parse(text) as Record<string, unknown>;
      } catch {
        continue;
      }
      fn(line);
    }
  });
}
