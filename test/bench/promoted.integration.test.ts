// bench/scripts/promoted.mjs against a real process under --inspect: the site whose objects live for a second ranks
// high, many times its share of all allocations; the site whose objects die at once dominates only with --all (every
// allocation).
import t from 'tap';
import { execFile, spawn } from 'node:child_process';
import path from 'node:path';
import { ROOT } from '../helpers/bench.js';

const SCRIPT = path.join(ROOT, 'bench/scripts/promoted.mjs');

// Every millisecond or so: 10 arrays kept for about a second, and 10 × 20 of the same size dropped at once (twenty
// times the bytes). Run without inlining, so each allocation stays with the function that makes it.
const CHILD = `
const kept = [];
function keepsForASecond(batch) { batch.push(new Array(32).fill(batch.length)); }
function dropsAtOnce(i) { return new Array(32).fill(i); }
let sink = 0;
function tick() {
  const batch = [];
  for (let i = 0; i < 10; i++) {
    keepsForASecond(batch);
    for (let j = 0; j < 20; j++) sink += dropsAtOnce(j).length;
  }
  kept.push(batch);
  if (kept.length > 1000) kept.shift();
  setTimeout(tick, 1);
}
tick();
`;

function run(args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(process.execPath, [SCRIPT, ...args], { cwd: ROOT, timeout: 30_000 }, (err, stdout, stderr) => (err ? reject(new Error(`${err.message}\n${stderr}`)) : resolve(stdout)));
  });
}

t.test('sites that outlive the young generation, by bytes', async (t) => {
  const child = spawn(process.execPath, ['--no-turbo-inlining', '--inspect=127.0.0.1:0', '-e', CHILD], { stdio: ['ignore', 'ignore', 'pipe'] });
  t.teardown(() => void child.kill('SIGKILL'));
  const port = await new Promise<number>((resolve, reject) => {
    let err = '';
    child.stderr!.on('data', (b: Buffer) => {
      err += b.toString();
      const m = /ws:\/\/127\.0\.0\.1:(\d+)\//.exec(err);
      if (m) resolve(Number(m[1]));
    });
    child.once('exit', (code) => reject(new Error(`child exited with ${code}: ${err}`)));
  });

  const promoted = await run(['--port', String(port), '--seconds', '2', '--top', '10']);
  t.match(promoted, /^not collected by a scavenge: [\d.]+ MB\/s over 2 s/, 'the headline names what was counted');
  const all = await run(['--port', String(port), '--seconds', '1', '--top', '10', '--all']);
  t.match(all, /^allocated: /);
  const lines = (out: string): string[] => out.split('\n').filter((l) => /^ *[\d.]+ +[\d.]+% /.test(l));
  const share = (out: string, name: string): number => Number(/([\d.]+)%/.exec(lines(out).find((l) => l.includes(name)) ?? '0%')?.[1] ?? 0);
  // Full GCs also collect young objects, and a slow machine runs more of them, so the dropped site may still rank
  // first; what must hold is that the kept site ranks high and is many times more present than in all allocations.
  t.ok(lines(promoted).slice(0, 2).some((l) => l.includes('keepsForASecond')), `the kept arrays' site is among the first two:\n${promoted}`);
  t.match(lines(all)[0], /dropsAtOnce/, `with --all, the site allocating twenty times the bytes comes first:\n${all}`);
  // A twenty-first of what is allocated, most of what is not collected young.
  t.ok(share(promoted, 'keepsForASecond') > 5 * share(all, 'keepsForASecond'), `kept arrays: ${share(promoted, 'keepsForASecond')}% of what outlived a scavenge, ${share(all, 'keepsForASecond')}% of what was allocated`);
});

t.test('without --port it prints its usage and fails', async (t) => {
  await t.rejects(run([]), /--port N/);
});
