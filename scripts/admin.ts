// `npm run admin -- memory-access <uid> on|off`: operator commands on the configured store; prints one line.
import { loadConfigOrExit } from '../engine/config.js';
import { openStore, storeOptions } from '../engine/db/store.js';
import { UsersRepository } from '../engine/db/users.js';
import { DataVersions, UNVERSIONED, VERSION_TTL_MS, type VersionedWrites } from '../engine/cache/data-versions.js';
import { EmbeddedRedis, createRedis, redisAnswers } from '../engine/redis.js';
import { createLogger } from '../engine/logger.js';

const USAGE = 'usage: npm run admin -- memory-access <uid> on|off\n';

const [command, uid, state] = process.argv.slice(2);
if (command !== 'memory-access' || !uid || uid.length > 128 || (state !== 'on' && state !== 'off') || process.argv.length !== 5) {
  process.stderr.write(USAGE);
  process.exit(2);
}

const config = loadConfigOrExit();
// Running nodes reuse what they found about the gate until the account's data version changes (engine/cache/data-versions.ts):
// the change must go through the Redis they share, or the embedded one a single service runs.
const redisUrl = (await redisAnswers(config.redisUrl)) ? config.redisUrl : await EmbeddedRedis.running(config.dataDir);
if (redisUrl === undefined && config.redisEmbedded === 'never') {
  process.stderr.write(`nothing changed: Redis does not answer at REDIS_URL, and running nodes would not hear of the change\n`);
  process.exit(1);
}
const redis = redisUrl === undefined ? undefined : createRedis(redisUrl);
redis?.on('error', () => undefined);
const versions: VersionedWrites = redis ? new DataVersions({ redis, prefix: config.redisPrefix, logger: createLogger(config.logLevel) }) : UNVERSIONED;
const store = openStore(storeOptions(config));
try {
  // The service may not have run yet on this store: bring the schema up to date first.
  await store.migrate();
  await new UsersRepository(store.knex, versions).setMemoryAccess(uid, state === 'on', Date.now());
  process.stdout.write(`memory access for ${uid}: ${state}\n`);
  if (!redis) process.stderr.write(`note: no Redis answered, so no running node was told; one that is running may keep the old state for up to ${VERSION_TTL_MS / 60_000} minutes\n`);
} finally {
  await store.close();
  await redis?.quit().catch(() => undefined);
  redis?.disconnect();
}
