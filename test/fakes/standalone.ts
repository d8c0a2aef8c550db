// Standalone mode of a provider fake for the load bench: `node <fake>.js --port 0 [--key K] ...` prints `{"port":N}`
// once listening and stops on SIGTERM or SIGINT.
import { pathToFileURL } from 'node:url';

/** A started fake: its port and how it closes. */
export interface StandaloneFake {
  port: number;
  close(): Promise<void>;
}

/**
 * Runs `start` when the module at `moduleUrl` is the process's entry point (not when a test imports it); `start` gets a
 * reader of the command line's `--name value` options.
 */
export function runStandalone(moduleUrl: string, start: (arg: (name: string) => string | undefined) => Promise<StandaloneFake>): void {
  if (!process.argv[1] || moduleUrl !== pathToFileURL(process.argv[1]).href) return;
  const argv = process.argv.slice(2);
  const arg = (name: string): string | undefined => {
    const i = argv.indexOf(name);
    return i >= 0 ? argv[i + 1] : undefined;
  };
  start(arg).then(
    (fake) => {
      process.stdout.write(`${JSON.stringify({ port: fake.port })}\n`);
      const stop = (): void => void fake.close().then(() => process.exit(0));
      process.on('SIGTERM', stop);
      process.on('SIGINT', stop);
    },
    (err: unknown) => {
      process.stderr.write(`${String(err)}\n`);
      process.exit(1);
    },
  );
}
