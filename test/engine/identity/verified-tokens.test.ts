// Remembered ID tokens: a token verified once is admitted again without a signature check, never past its exp or the
// cache's lifetime, and a token that failed is checked again every time. Tokens issued before their account was
// deleted are refused, and forgotten at the deletion.
import t from 'tap';
import { Authenticator } from '../../../engine/identity/authenticator.js';
import type { IdTokenVerifier, VerifiedIdToken } from '../../../engine/identity/id-tokens.js';
import type { ApiKeysRepository } from '../../../engine/db/api-keys.js';
import { ManualClock } from '../../../engine/clock.js';
import { createLogger } from '../../../engine/logger.js';
import { EngineError } from '../../../engine/errors.js';

/** Tokens are "uid:expSeconds[:iatSeconds]"; "bad" fails. Counts the signature checks it was asked for. */
class CountingVerifier implements IdTokenVerifier {
  calls = 0;
  async verify(token: string): Promise<VerifiedIdToken> {
    this.calls++;
    const [uid, exp, iat] = token.split(':');
    if (uid === 'bad' || exp === undefined) throw new EngineError('ENG_ERR_AUTH_TOKEN_INVALID');
    return { uid: uid!, expiresAtMs: Number(exp) * 1000, issuedAtMs: iat === undefined ? 0 : Number(iat) * 1000 };
  }
}

/** Deletion times by uid; `lookups` counts the reads, `gate` holds the next read until released. */
class Deletions {
  readonly at = new Map<string, number>();
  lookups = 0;
  gate: Promise<void> | undefined;
  async deletedAt(uid: string): Promise<number | undefined> {
    this.lookups++;
    await this.gate;
    return this.at.get(uid);
  }
}

function setup(idTokenCacheMs: number, deletions?: Deletions) {
  const clock = new ManualClock(Date.UTC(2026, 10, 26, 12, 0, 0));
  const verifier = new CountingVerifier();
  const auth = new Authenticator({
    verifier,
    keys: {} as ApiKeysRepository,
    clock,
    logger: createLogger('silent'),
    lastUsedIntervalMs: 60_000,
    cacheTtlMs: 60_000,
    idTokenCacheMs,
    revocationChannel: 'unused',
    ...(deletions && { deletedAccounts: deletions }),
  });
  const nowS = clock.now() / 1000;
  return { clock, verifier, auth, nowS };
}

t.test('a verified token is known until the cache lifetime ends, then verified again', async (t) => {
  const { clock, verifier, auth, nowS } = setup(300_000);
  const header = `Bearer u1:${nowS + 3600}`;
  t.equal(auth.knownIdToken(header), undefined, 'not known before it was verified');
  t.same(await auth.idToken(header), { uid: 'u1', via: 'id_token' });
  t.same(auth.knownIdToken(header), { uid: 'u1', via: 'id_token' }, 'known at once after');
  t.same(await auth.idToken(header), { uid: 'u1', via: 'id_token' });
  t.same(await auth.apiKey(header, 'dev', undefined, true), { uid: 'u1', via: 'id_token' }, 'REST routes that take ID tokens share it');
  t.equal(verifier.calls, 1, 'one signature check for three uses');
  clock.advance(300_000);
  t.equal(auth.knownIdToken(header), undefined, 'forgotten after the lifetime');
  await auth.idToken(header);
  t.equal(verifier.calls, 2, 'verified again');
  t.equal(auth.knownIdToken('Bearer u1:other'), undefined, 'another token is not known');
  t.equal(auth.knownIdToken(undefined), undefined);
});

t.test('a remembered token ends at its exp', async (t) => {
  const { clock, auth, nowS } = setup(300_000);
  const header = `Bearer u2:${nowS + 60}`;
  await auth.idToken(header);
  clock.advance(59_999);
  t.ok(auth.knownIdToken(header), 'known just before exp');
  clock.advance(1);
  t.equal(auth.knownIdToken(header), undefined, 'not known at exp');
});

t.test('a failed token is not remembered', async (t) => {
  const { verifier, auth, nowS } = setup(300_000);
  for (let i = 0; i < 2; i++) await t.rejects(auth.idToken(`Bearer bad:${nowS + 60}`), { code: 'ENG_ERR_AUTH_TOKEN_INVALID' });
  t.equal(verifier.calls, 2, 'checked each time');
  t.equal(auth.knownIdTokens, 0);
});

t.test('ID_TOKEN_CACHE_S=0 verifies every time', async (t) => {
  const { verifier, auth, nowS } = setup(0);
  const header = `Bearer u1:${nowS + 3600}`;
  await auth.idToken(header);
  await auth.idToken(header);
  t.equal(auth.knownIdToken(header), undefined);
  t.equal(verifier.calls, 2);
});

t.test('the cache holds no more than the tokens of its lifetime', async (t) => {
  const { clock, auth, nowS } = setup(10_000);
  // One new token per second for a minute: with a 10 s lifetime, at most about ten are held at any time.
  for (let i = 0; i < 60; i++) {
    await auth.idToken(`Bearer u${i}:${nowS + 3600}`);
    t.ok(auth.knownIdTokens <= 11, `held ${auth.knownIdTokens} after ${i + 1}`);
    clock.advance(1000);
  }
  t.equal(auth.knownIdToken(`Bearer u0:${nowS + 3600}`), undefined, 'the oldest is gone');
  t.ok(auth.knownIdToken(`Bearer u59:${nowS + 3600}`), 'the newest is known');
  await auth.close();
  t.equal(auth.knownIdTokens, 0, 'close() forgets them');
});

t.test('a token issued before its account was deleted is refused, except to finish the deletion', async (t) => {
  const deletions = new Deletions();
  const { clock, auth, nowS } = setup(300_000, deletions);
  const before = `Bearer gone:${nowS + 3600}:${nowS}`;
  const other = `Bearer stays:${nowS + 3600}:${nowS}`;
  t.same(await auth.idToken(before), { uid: 'gone', via: 'id_token' }, 'accepted while the account lives');
  await auth.idToken(other);
  deletions.at.set('gone', clock.now());
  await auth.accountDeleted('gone');
  t.equal(auth.knownIdToken(before), undefined, 'forgotten at the deletion');
  t.ok(auth.knownIdToken(other), "another user's token is still known");
  await t.rejects(auth.idToken(before), { code: 'ENG_ERR_AUTH_ACCOUNT_DELETED', status: 401 });
  await t.rejects(auth.apiKey(before, 'dev', undefined, true), { code: 'ENG_ERR_AUTH_ACCOUNT_DELETED' }, 'on routes that also take keys too');
  await t.rejects(auth.idToken(`Bearer gone:${nowS + 3600}`), { code: 'ENG_ERR_AUTH_ACCOUNT_DELETED' }, 'a token without iat counts as issued before');
  t.same(await auth.idToken(before, true), { uid: 'gone', via: 'id_token' }, 'taken to finish the deletion');
  t.equal(auth.knownIdToken(before), undefined, 'and not remembered for anything else');
  clock.advance(1000);
  const after = `Bearer gone:${nowS + 7200}:${nowS + 1}`;
  t.same(await auth.idToken(after), { uid: 'gone', via: 'id_token' }, 'a token issued after the deletion signs in');
  t.ok(auth.knownIdToken(after));
});

t.test('a token being checked while its account is deleted is refused', async (t) => {
  const deletions = new Deletions();
  const { clock, auth, nowS } = setup(300_000, deletions);
  const header = `Bearer racing:${nowS + 3600}:${nowS}`;
  let release!: () => void;
  deletions.gate = new Promise((r) => (release = r));
  const checked = auth.idToken(header);
  await new Promise((r) => setImmediate(r));
  t.equal(deletions.lookups, 1, 'the deletion record is being read');
  deletions.at.set('racing', clock.now());
  await auth.accountDeleted('racing');
  release();
  await t.rejects(checked, { code: 'ENG_ERR_AUTH_ACCOUNT_DELETED' }, 'the record is read again and refuses it');
  t.equal(deletions.lookups, 2);
  t.equal(auth.knownIdToken(header), undefined, 'and it is not remembered');
});
