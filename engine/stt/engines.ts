// The speech engines a node runs, built from STT_PROVIDERS in preference order (engine/config.ts validated the keys).
import type { Clock } from '../clock.js';
import type { Config } from '../config.js';
import type { Logger } from '../logger.js';
import type { Scheduler } from '../scheduler.js';
import type { SttEngine } from './types.js';
import { LocalGatedEngine } from './local/engine.js';
import { ProviderAEngine } from './provider-a/engine.js';
import { ProviderBEngine } from './provider-b/engine.js';

export interface EngineDeps {
  clock: Clock;
  scheduler: Scheduler;
  logger: Logger;
  /** Audio per provider message, in ms (a test's tuning). @defaultValue SEND_MS (engine/stt/remote/plan.ts) */
  sendMs?: number | undefined;
}

export function createSttEngines(config: Config, deps: EngineDeps): SttEngine[] {
  const { sendMs, ...clocks } = deps;
  const remote = { ...clocks, ...(sendMs !== undefined ? { sendMs } : {}), staggerFirst: Math.random };
  return config.sttProviders.map((name): SttEngine => {
    switch (name) {
      case 'provider_b':
        return new ProviderBEngine({ url: config.providerBUrl, apiKey: config.providerBApiKey!, ...remote });
      case 'local':
        return new LocalGatedEngine({ vadGate: config.vadGate, scheduler: deps.scheduler, clock: deps.clock });
      case 'provider_a':
        return new ProviderAEngine({ url: config.providerAUrl, apiKey: config.providerAApiKey!, ...remote });
    }
  });
}
