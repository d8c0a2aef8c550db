// The main thread's longest event-loop delay while the service takes the largest offline sync batch: 20 files of
// length-prefixed pcm16 frames, 100 s each (61 MiB), posted one batch at a time to a service in its own process;
// prints the POST's time and the delay (nodejs_eventloop_lag_max_seconds between two scrapes) during it and during
// the job that follows.
// `node bench/scripts/sync-batch-stall.mjs [--batches 3] [--root DIR]` (--root: another checkout's build, to compare
// two versions back to back; its bench/ is used too).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { fileURLToPath } from 'node:url';

const { values } = parseArgs({ options: { batches: { type: 'string', default: '3' }, root: { type: 'string' } } });
const root = path.resolve(values.root ?? fileURLToPath(new URL('../../', import.meta.url)));
const FILES = 20;
const FILE_S = 100;
process.chdir(root);
const { cleanRedis, serviceEnv, startChild } = await import(path.join(root, 'bench/lib/processes.mjs'));
const { signTokens, startFakeProvider } = await import(path.join(root, 'bench/listen/stack.mjs'));

/** `seconds` of quiet noise as 20 ms pcm16 frames, each behind its 4-byte length. @param {number} seconds @param {number} seed */
function pcm16Frames(seconds, seed) {
  const out = Buffer.alloc(seconds * 50 * 644);
  for (let i = 0, at = 0; i < seconds * 50; i++) {
    out.writeUInt32LE(640, at);
    at += 4;
    for (let j = 0; j < 320; j++, at += 2) out.writeInt16LE(Math.round((Math.random() - 0.5) * 200) + seed, at);
  }
  return out;
}

const dataDir = mkdtempSync(path.join(tmpdir(), 'sync-stall-'));
const fake = await startFakeProvider('sync-stall-key');
const env = await serviceEnv(dataDir, { STT_PROVIDERS: 'provider_a', PROVIDER_A_API_KEY: 'sync-stall-key', PROVIDER_A_URL: `ws://127.0.0.1:${fake.port}/v1/listen` });
const service = await startChild({ name: 'service', args: ['dist/engine/index.js'], env, port: Number(env.PORT), probePath: '/health' });
const lagMs = async () => 1000 * Number(/^nodejs_eventloop_lag_max_seconds (\S+)/m.exec(await (await fetch(`${service.url}/metrics`)).text())?.[1]);
try {
  for (let b = 0; b < Number(values.batches); b++) {
    const [token] = await signTokens(env, [`sync-stall-${b}`], 3600);
    const form = new FormData();
    const t0 = Math.floor(Date.now() / 1000) - 86400;
    let bytes = 0;
    for (let f = 0; f < FILES; f++) {
      const file = pcm16Frames(FILE_S, b * FILES + f);
      bytes += file.byteLength;
      form.append('files', new Blob([file]), `rec_${t0 + f * 2 * FILE_S}_pcm16.bin`);
    }
    await lagMs();
    const started = performance.now();
    const res = await fetch(`${service.url}/v2/sync-local-files`, { method: 'POST', body: form, headers: { authorization: `Bearer ${token}` } });
    await res.arrayBuffer();
    const ms = performance.now() - started;
    const during = await lagMs();
    await new Promise((r) => setTimeout(r, 8000));
    console.log(`batch ${b + 1}: ${FILES} files, ${(bytes / 1048576).toFixed(1)} MiB, status ${res.status} in ${ms.toFixed(0)} ms; main thread's longest event-loop delay: ${during.toFixed(1)} ms during the POST, ${(await lagMs()).toFixed(1)} ms in the 8 s after (the job)`);
  }
} finally {
  await service.stop();
  await fake.stop();
  await cleanRedis(env.REDIS_PREFIX);
  rmSync(dataDir, { recursive: true, force: true });
}
