// Stand-in entry point for a build whose engine/index.js cannot use provider_a from STT_PROVIDERS: the same start-up with
// the provider_a engine; the fleet bench tries the real entry first and reports when it had to use this one.
import path from 'node:path';
import { ROOT_DIR } from '../lib/report.mjs';

const dist = (/** @type {string} */ p) => import(path.join(ROOT_DIR, 'dist', p));
const { loadConfig } = await dist('engine/config.js');
const { createLogger } = await dist('engine/logger.js');
const { Service } = await dist('engine/app.js');
const { Scheduler } = await dist('engine/scheduler.js');
const { systemClock } = await dist('engine/clock.js');
const { ProviderAEngine } = await dist('engine/stt/provider-a/engine.js');

const config = loadConfig();
const logger = createLogger(config.logLevel);
if (!config.providerAApiKey) throw new Error('PROVIDER_A_API_KEY is required');
const scheduler = new Scheduler({ clock: systemClock, resolutionMs: 50 });
const engine = new ProviderAEngine({ url: config.providerAUrl, apiKey: config.providerAApiKey, clock: systemClock, scheduler, logger });
const service = await Service.start({ config, logger, sttEngines: [engine] });
let stopping = false;
const stop = () => {
  if (stopping) process.exit(1);
  stopping = true;
  service.stop().then(
    () => process.exit(0),
    () => process.exit(1),
  );
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
