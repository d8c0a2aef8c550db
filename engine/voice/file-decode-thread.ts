// The file decoder's thread (engine/voice/file-decoder.ts): uploaded audio, voice messages and offline sync files
// alike, to 16 kHz mono PCM, and a sync file's start, length and hash when its batch is taken; what is wrong with a
// file comes back as its public-safe reason, not as a thrown error.
import { moveAnswer } from '../../workers/messages.js';
import type { SpeechCheckAnswer, SpeechCheckTask } from '../../workers/voice-gate.js';
import { parseSyncFile, probeSyncFile, type SyncProbe } from '../sync/files.js';
import { AudioInputError } from './audio.js';
import { VoiceFailure } from './outcome.js';
import { readVoiceUpload, type VoiceQuery } from './upload.js';

export type FileDecodeTask =
  | { kind: 'voice'; contentType: string | undefined; query: VoiceQuery; body: Uint8Array | undefined; nowMs: number; gate?: Omit<SpeechCheckTask, 'pcm'> }
  | { kind: 'sync'; bytes: Uint8Array; filename: string; nowMs: number }
  | { kind: 'probe'; bytes: Uint8Array; filename: string; nowMs: number };

export type FileDecodeAnswer =
  | { ok: true; pcm: Int16Array; language: string | undefined; gate?: SpeechCheckAnswer }
  | { ok: true; probe: SyncProbe }
  | { ok: false; reason: string };

/** What is wrong with a file, public-safe; undefined for an error that is not the file's. */
function reasonOf(err: unknown): string | undefined {
  if (err instanceof VoiceFailure) return err.message;
  if (err instanceof AudioInputError) return err.reason;
  return undefined;
}

export default function decodeUploadedFile(task: FileDecodeTask): FileDecodeAnswer | Promise<FileDecodeAnswer> {
  try {
    return decode(task);
  } catch (err) {
    const reason = reasonOf(err);
    if (reason === undefined) throw err;
    return { ok: false, reason };
  }
}

function decode(task: FileDecodeTask): FileDecodeAnswer | Promise<FileDecodeAnswer> {
  if (task.kind === 'probe') return { ok: true, probe: probeSyncFile(task.bytes, task.filename, task.nowMs) };
  const { pcm, language } = task.kind === 'voice' ? readVoiceUpload(task.contentType, task.query, task.body, task.nowMs) : { pcm: parseSyncFile(task.bytes, task.filename, task.nowMs).decode(), language: undefined };
  // Only a buffer the PCM has to itself is moved (a view into a larger one, such as Node's Buffer pool, is copied).
  const own = pcm.byteOffset === 0 && pcm.byteLength === pcm.buffer.byteLength ? pcm : pcm.slice();
  const answer = (gate?: SpeechCheckAnswer): FileDecodeAnswer => moveAnswer({ ok: true, pcm: own, language, ...(gate ? { gate } : {}) }, [own.buffer as ArrayBuffer]);
  // A voice message's speech gate runs here too, on the PCM just decoded: one crossing for the upload, not two.
  // Loaded with the first gate asked for: a thread that only decodes sync files never loads the detector.
  if (task.kind === 'voice' && task.gate && own.length > 0) {
    const gate = task.gate;
    return import('../../workers/voice-gate.js').then((m) => m.default({ pcm: own, ...gate })).then(answer);
  }
  return answer();
}
