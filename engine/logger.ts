// Structured logs: static messages with ids and figures as fields; never audio, transcript text or secrets.
import { pino, type Logger } from 'pino';
import type { LogLevel } from './config.js';

export type { Logger };

export function createLogger(level: LogLevel, destination?: pino.DestinationStream): Logger {
  return pino(
    {
      level,
      base: { service: 'wearable-backend' },
      timestamp: pino.stdTimeFunctions.isoTime,
      // Defence in depth: should a header or token ever reach a log call, it is censored.
      redact: { paths: ['authorization', '*.authorization', 'headers.authorization', 'token', '*.token', 'key', '*.key'], censor: '[redacted]' },
    },
    destination,
  );
}
