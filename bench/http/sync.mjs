// Offline sync through the service: WAV recordings of espeak-ng speech (made once, repeated by sox) uploaded to
// POST /v2/sync-local-files, transcribed through the provider_a fake and placed into conversations; audio hours per
// wall-clock minute, from the first upload to the last batch completed.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { figuresOf, finish, machine } from '../lib/report.mjs';
import { cleanRedis, serviceEnv, startChild } from '../lib/processes.mjs';
import { signTokens, startFakeProvider } from '../listen/stack.mjs';

export const USAGE = `npm run bench -- sync [--hours 1] [--file-minutes 10] [--in-flight 4] [--smoke]
  --hours         audio to sync in all, in hours (default 1)
  --file-minutes  length of each recording, in minutes (default 10; a batch holds one recording)
  --in-flight     batches queued or running at once (default 4, what one jobs node runs together)
  --smoke         6 recordings of 1 minute
  --out           result file (default bench/results/<timestamp>-sync.json)`;

/**
 * A recording of `minutes` as a 16 kHz mono WAV file's bytes: one espeak-ng sentence and a pause, repeated.
 * @param {string} dir
 * @param {number} minutes
 */
function recording(dir, minutes) {
  const spoken = path.join(dir, 'spoken.wav');
  const wav = path.join(dir, 'recording.wav');
  execFileSync('espeak-ng', ['-s', '150', '-w', spoken, 'We went over the budget for the new office and agreed to meet again on Thursday.']);
  // Padded to 10 s: speech and a pause, as a day's recording has.
  execFileSync('sox', ['-V1', spoken, '-r', '16000', '-c', '1', '-b', '16', wav, 'pad', '0', '10', 'trim', '0', '10', 'repeat', String(minutes * 6 - 1)]);
  return readFileSync(wav);
}

/** @param {Record<string, string | true>} options */
export async function run(options) {
  const smoke = options.smoke === true;
  const fileMinutes = Number(options['file-minutes'] ?? (smoke ? 1 : 10));
  const hours = Number(options.hours ?? (smoke ? 0.1 : 1));
  const inFlight = Number(options['in-flight'] ?? 4);
  if (!(fileMinutes > 0 && fileMinutes <= 30) || !(hours > 0) || !(inFlight >= 1)) throw new Error('--file-minutes must be in (0, 30], --hours above 0, --in-flight at least 1');
  const batches = Math.max(1, Math.round((hours * 60) / fileMinutes));
  const m = machine();
  const dataDir = mkdtempSync(path.join(tmpdir(), 'bench-sync-'));
  const key = 'bench-sync-key';
  const fake = await startFakeProvider(key);
  const env = await serviceEnv(dataDir, { STT_PROVIDERS: 'provider_a', PROVIDER_A_API_KEY: key, PROVIDER_A_URL: `ws://127.0.0.1:${fake.port}/v1/listen` });
  /** @type {Awaited<ReturnType<typeof startChild>> | undefined} */
  let service;
  let serviceExit = /** @type {number | null} */ (null);
  let failed = 0;
  let elapsedMs = 0;
  let audioS = 0;
  /** @type {number[]} seconds from each batch's POST to its completion */
  const batchS = [];
  try {
    service = await startChild({ name: 'service', args: ['dist/engine/index.js'], env, port: Number(env.PORT), probePath: '/health' });
    const wav = recording(dataDir, fileMinutes);
    // One user per batch: fair use allows a user 2 batches under way and 4 hours of audio an hour.
    const tokens = await signTokens(env, Array.from({ length: batches }, (_, i) => `bench-sync-${i}`), 7200);
    const startedAtS = Math.floor(Date.now() / 1000) - 86400;
    let next = 0;
    const one = async () => {
      const i = next++;
      const auth = { authorization: `Bearer ${tokens[i]}` };
      const form = new FormData();
      form.append('files', new Blob([wav]), `rec_${startedAtS + i * fileMinutes * 60}.wav`);
      const t0 = performance.now();
      const res = await fetch(`${service?.url}/v2/sync-local-files`, { method: 'POST', body: form, headers: auth });
      const accepted = /** @type {any} */ (await res.json());
      if (res.status !== 202) throw new Error(`POST /v2/sync-local-files answered ${res.status}: ${JSON.stringify(accepted)}`);
      for (;;) {
        // A tenth of the poll interval the service asks for: the figure is the batch's end, not the client's poll.
        await new Promise((r) => setTimeout(r, 500));
        const job = /** @type {any} */ (await (await fetch(`${service?.url}/v2/sync-local-files/${accepted.job_id}`, { headers: auth })).json());
        if (job.status === 'completed' || job.status === 'failed') {
          if (job.status === 'failed' || job.files.some((/** @type {any} */ f) => f.status !== 'done')) failed++;
          audioS += job.audio_s;
          batchS.push((performance.now() - t0) / 1000);
          return;
        }
      }
    };
    const start = performance.now();
    await Promise.all(Array.from({ length: Math.min(inFlight, batches) }, async () => {
      while (next < batches) await one();
    }));
    elapsedMs = performance.now() - start;
  } finally {
    if (service) serviceExit = await service.stop();
    await fake.stop();
    await cleanRedis(env.REDIS_PREFIX);
    rmSync(dataDir, { recursive: true, force: true });
  }
  const hoursPerMinute = Number((audioS / 3600 / (elapsedMs / 60_000)).toFixed(3));
  const realtime = Math.round(audioS / (elapsedMs / 1000));
  batchS.sort((a, b) => a - b);
  const p50 = Number((batchS[Math.floor(batchS.length / 2)] ?? 0).toFixed(1));
  const result = {
    scenario: 'sync',
    version: 1,
    startedAt: new Date().toISOString(),
    machine: m,
    options: { hours, fileMinutes, inFlight, smoke, batches },
    baseline: `none: ${batches} batches of one ${fileMinutes}-minute WAV recording (espeak-ng speech and pauses), ${inFlight} under way at once, to the provider_a fake (filler words every 2 s of audio)`,
    summary: {
      head: ['target', 'audio hours per minute', '× real time', 'batch p50 s', 'failed', 'what'],
      rows: [['POST /v2/sync-local-files', String(hoursPerMinute), String(realtime), String(p50), String(failed), 'upload, WAV decode, provider_a live stream, placement, conversation processing queued']],
    },
    figures: figuresOf({ 'sync audio hours per minute': [hoursPerMinute, 'h/min', 'higher'] }),
    goals: [],
    notes: [`${(audioS / 3600).toFixed(2)} h of audio in ${(elapsedMs / 1000).toFixed(1)} s`],
    tables: [],
    serviceExitCode: serviceExit,
  };
  finish(/** @type {any} */ (result), options);
  if (failed > 0) throw new Error(`${failed} of ${batches} batches failed: the figures are not valid`);
  if (serviceExit !== 0) throw new Error(`the service exited with ${serviceExit} on SIGTERM`);
  return result;
}
