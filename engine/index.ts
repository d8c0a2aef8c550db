// Process entry point for `npm start`: read config, start the service, stop gracefully on SIGTERM/SIGINT.
import { ConfigError, loadConfig, type Config } from './config.js';
import { createLogger } from './logger.js';
import { Service } from './app.js';
import { isEngineError } from './errors.js';
import { setWorkerSemiSpace } from './runtime/task-thread.js';

let config: Config;
try {
  config = loadConfig();
} catch (err) {
  if (err instanceof ConfigError) {
    process.stderr.write(`configuration error: ${err.message}\n`);
    process.exit(2);
  }
  throw err;
}

const logger = createLogger(config.logLevel);
setWorkerSemiSpace();

try {
  const service = await Service.start({ config, logger });
  let signals = 0;
  const onSignal = (signal: NodeJS.Signals): void => {
    signals++;
    if (signals > 1) {
      logger.warn({ signal }, 'second signal: exiting now');
      process.exit(1);
    }
    logger.info({ signal }, 'signal received');
    service.stop().then(
      () => process.exit(0),
      (err: unknown) => {
        logger.error({ code: isEngineError(err) ? err.code : undefined }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
} catch (err) {
  logger.fatal({ code: isEngineError(err) ? err.code : undefined, err: { message: (err as Error).message } }, 'start-up failed');
  process.exit(1);
}
