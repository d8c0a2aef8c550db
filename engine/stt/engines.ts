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
}

export function createSttEngines(config: Config, deps: EngineDeps): SttEngine[] {
  return config.sttProviders.map((name): SttEngine => {
    switch (name) {
      case 'provider_b':
        return new ProviderBEngine({ url: config.providerBUrl, apiKey: config.providerBApiKey!, sendMs: config.sttSendMs, staggerFirst: Math.random, ...deps });
      case 'local':
        return new LocalGatedEngine({ vadGate: config.vadGate });
      case 'provider_a':
        return new ProviderAEngine({ url: config.providerAUrl, apiKey: config.providerAApiKey!, sendMs: config.sttSendMs, staggerFirst: Math.random, ...deps });
    }
  });
}
