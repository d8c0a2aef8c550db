// `npm start` hands its shell over to node (exec), and the benches run the service with the start script's node flags
// (bench/listen/stack.mjs startScriptFlags).
import t from 'tap';
import path from 'node:path';
import { readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { ROOT } from '../helpers/bench.js';

const { startScriptFlags, SERVICE_NODE_ARGS } = (await import(pathToFileURL(path.join(ROOT, 'bench/listen/stack.mjs')).href)) as {
  startScriptFlags: (script: string) => string[];
  SERVICE_NODE_ARGS: string[];
};

t.test('the start script execs node, so no shell stays beside the service', async (t) => {
  const start = (JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { scripts: { start: string } }).scripts.start;
  t.match(start, /^exec node (--\S+ )*dist\/engine\/index\.js$/);
  t.same(SERVICE_NODE_ARGS, startScriptFlags(start));
  t.ok(SERVICE_NODE_ARGS.length > 0 && SERVICE_NODE_ARGS.every((f) => f.startsWith('--')), SERVICE_NODE_ARGS.join(' '));
});

t.test('the flags are read with or without exec; a script that does not run node is refused', async (t) => {
  t.same(startScriptFlags('exec node --a=1 --b dist/x.js'), ['--a=1', '--b']);
  t.same(startScriptFlags('node --a=1 dist/x.js --not-a-node-flag'), ['--a=1']);
  t.throws(() => startScriptFlags('bash scripts/start'), /does not run node/);
});
