// `npm run migrate [-- down]`: applies pending migrations (or reverts them all) on the configured store.
import { loadConfigOrExit } from '../engine/config.js';
import { openStore, storeOptions } from '../engine/db/store.js';

const config = loadConfigOrExit();
const store = openStore(storeOptions(config));
try {
  if (process.argv[2] === 'down') {
    const reverted = await store.rollbackAll();
    process.stdout.write(`reverted ${reverted.length} migration(s) on ${store.dialect}\n`);
  } else {
    const applied = await store.migrate();
    process.stdout.write(`applied ${applied.length} migration(s) on ${store.dialect}${applied.length ? `: ${applied.join(', ')}` : ''}\n`);
  }
} finally {
  await store.close();
}
