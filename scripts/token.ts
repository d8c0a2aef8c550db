// `npm run --silent token -- <uid>`: prints one line, an ID token for <uid> signed by the local issuer in DATA_DIR.
import { loadConfigOrExit } from '../engine/config.js';
import { systemClock } from '../engine/clock.js';
import { LocalIssuer } from '../engine/identity/id-tokens.js';

const uid = process.argv[2];
if (!uid || uid.length > 128) {
  process.stderr.write('usage: npm run --silent token -- <uid> [ttl-seconds]\n');
  process.exit(2);
}
const config = loadConfigOrExit();
if (config.idTokenJwksUrl) {
  process.stderr.write('ID_TOKEN_JWKS_URL is set: tokens come from your identity provider, not from this command\n');
  process.exit(2);
}
const ttl = process.argv[3] ? Number(process.argv[3]) : config.idTokenTtlS;
if (!Number.isInteger(ttl) || ttl <= 0) {
  process.stderr.write('ttl-seconds must be a positive integer\n');
  process.exit(2);
}
const issuer = await LocalIssuer.open(config.dataDir, {
  issuer: config.idTokenIssuer,
  audience: config.idTokenAudience,
  clockToleranceS: config.idTokenClockToleranceS,
  clock: systemClock,
});
process.stdout.write(`${await issuer.sign(uid, ttl)}\n`);
