// Entry of the built-in processor's thread (engine/processing/builtin.ts BuiltinProcessor starts it through
// engine/runtime/task-thread.ts): one task is one transcript, the answer its structure.
import { processBuiltin } from './builtin.js';
import type { ProcessInput, ProcessResult } from './types.js';

export interface BuiltinTask {
  input: ProcessInput;
  producedBy: ProcessResult['producedBy'];
}

export default function handle(task: BuiltinTask): ProcessResult {
  return processBuiltin(task.input, task.producedBy);
}
