// A service process like `node dist/engine/index.js`, for tests that kill nodes: BullMQ's checks for jobs and webhook
// deliveries whose process died run every second, so another jobs node takes them over within seconds, not 30 s.
import { loadConfig } from '../../engine/config.js';
import { createLogger } from '../../engine/logger.js';
import { Service } from '../../engine/app.js';

const config = loadConfig();
const logger = createLogger(config.logLevel);
const service = await Service.start({ config, logger, tuning: { webhookStalledIntervalMs: 1000, processingStalledIntervalMs: 1000 } });
process.on('SIGTERM', () => void service.stop().then(() => process.exit(0), () => process.exit(1)));
