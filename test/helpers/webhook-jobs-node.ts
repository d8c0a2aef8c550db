// A jobs node in a process of its own, for tests that kill it mid-delivery: the service from the environment, with
// BullMQ's check for interrupted jobs shortened so another process takes them over within a second or two.
import { loadConfig } from '../../engine/config.js';
import { createLogger } from '../../engine/logger.js';
import { Service } from '../../engine/app.js';

const config = loadConfig();
const service = await Service.start({ config, logger: createLogger(config.logLevel), tuning: { webhookStalledIntervalMs: 1000 } });
process.stdout.write(`${JSON.stringify({ msg: 'listening', port: service.port })}\n`);
process.on('SIGTERM', () => void service.stop().then(() => process.exit(0), () => process.exit(1)));
