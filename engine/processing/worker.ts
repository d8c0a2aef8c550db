// Entry of the built-in processor's thread (engine/processing/builtin.ts BuiltinProcessor starts it through
// engine/runtime/task-thread.ts): one task is one transcript, the answer its structure.
import { processBuiltin } from './builtin.js';
import type { BuiltinTask } from './types.js';
import type { ProcessResult } from './types.js';

export default function handle(task: BuiltinTask): ProcessResult {
  return processBuiltin(task.input, task.producedBy);
}
