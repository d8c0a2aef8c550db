// The error catalogue and docs/errors.md list the same codes, and errors carry their status and code.
import t from 'tap';
import { readFileSync } from 'node:fs';
import { ERRORS, EngineError, isEngineError } from '../../engine/errors.js';

t.test('docs/errors.md lists exactly the catalogue, with the same statuses', async (t) => {
  const doc = readFileSync(new URL('../../../docs/errors.md', import.meta.url), 'utf8');
  const rows = new Map<string, number>();
  for (const m of doc.matchAll(/^\| `(ENG_ERR_[A-Z0-9_]+)` \| (\d{3}) \|/gm)) rows.set(m[1]!, Number(m[2]));
  t.same([...rows.keys()].sort(), Object.keys(ERRORS).sort());
  for (const [code, def] of Object.entries(ERRORS)) t.equal(rows.get(code), def.status, code);
});

t.test('EngineError carries code, status and filled message', async (t) => {
  const e = new EngineError('ENG_ERR_AUTH_SCOPE_MISSING', { scope: 'goals:write' });
  t.equal(e.code, 'ENG_ERR_AUTH_SCOPE_MISSING');
  t.equal(e.status, 403);
  t.equal(e.detail, 'Insufficient permissions. Required scope: goals:write');
  t.ok(isEngineError(e));
  t.notOk(isEngineError(new Error('x')));
  t.notOk(isEngineError(Object.assign(new Error('x'), { code: 'ENOENT' })));
  const structured = new EngineError('ENG_ERR_HTTP_VALIDATION', {}, { detail: [{ loc: ['body'], msg: 'm', type: 't' }] });
  t.same(structured.detail, [{ loc: ['body'], msg: 'm', type: 't' }]);
});
