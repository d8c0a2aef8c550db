// `npm run admin -- memory-access <uid> on|off`: operator commands on the configured store; prints one line.
import { loadConfig } from '../engine/config.js';
import { openStore, storeOptions } from '../engine/db/store.js';
import { UsersRepository } from '../engine/db/users.js';

const USAGE = 'usage: npm run admin -- memory-access <uid> on|off\n';

const [command, uid, state] = process.argv.slice(2);
if (command !== 'memory-access' || !uid || uid.length > 128 || (state !== 'on' && state !== 'off') || process.argv.length !== 5) {
  process.stderr.write(USAGE);
  process.exit(2);
}

const config = loadConfig();
const store = openStore(storeOptions(config));
try {
  // The service may not have run yet on this store: bring the schema up to date first.
  await store.migrate();
  await new UsersRepository(store.knex).setMemoryAccess(uid, state === 'on', Date.now());
  process.stdout.write(`memory access for ${uid}: ${state}\n`);
} finally {
  await store.close();
}
