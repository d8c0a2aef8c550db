// Module hooks that note every package a process resolves by bare name, one per line, in the file RESOLVE_LOG names
// (tests of what a node loads: node --import <this module> ...).
import { appendFileSync } from 'node:fs';
import { register } from 'node:module';

interface ResolveContext {
  parentURL?: string;
}
type NextResolve = (specifier: string, context: ResolveContext) => Promise<unknown>;

export async function resolve(specifier: string, context: ResolveContext, next: NextResolve): Promise<unknown> {
  const log = process.env.RESOLVE_LOG;
  if (log && /^[@a-z]/.test(specifier) && !specifier.startsWith('node:')) appendFileSync(log, `${specifier}\n`);
  return next(specifier, context);
}

// Imported with --import: registers this same module as the hooks (on the loader's own thread).
if (process.env.RESOLVE_LOG_REGISTER === '1') {
  process.env.RESOLVE_LOG_REGISTER = '0';
  register(import.meta.url);
}
