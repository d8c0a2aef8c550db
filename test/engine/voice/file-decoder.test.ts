// Uploaded files decoded on the file decoder's thread: the same PCM as on the calling thread for voice messages and
// offline sync files, the same public reasons for bad files, and an error of the thread's own told apart from them.
import t from 'tap';
import { randomBytes } from 'node:crypto';
import { TaskThread } from '../../../engine/runtime/task-thread.js';
import { AudioInputError } from '../../../engine/voice/audio.js';
import { FileDecoder } from '../../../engine/voice/file-decoder.js';
import type { FileDecodeAnswer, FileDecodeTask } from '../../../engine/voice/file-decode-thread.js';
import { readVoiceUpload } from '../../../engine/voice/upload.js';
import { parseSyncFile, probeSyncFile } from '../../../engine/sync/files.js';
import { opusBinFile, sine, writeWav } from '../../helpers/codec-fixtures.js';
import { silence, speak } from '../../helpers/speech.js';
import { SpeechCheck } from '../../../engine/voice/speech-check.js';
import { readFileSync } from 'node:fs';

const NOW_MS = Date.UTC(2026, 10, 23, 12);
const TS = Math.floor(NOW_MS / 1000) - 3600;
const HANDLER = new URL('../../../engine/voice/file-decode-thread.js', import.meta.url).href;

/** `seconds` of a tone as a device's `.bin` file. */
const opusBin = (seconds: number): Buffer => opusBinFile(sine(330, 16000, seconds, 6000));

function form(files: { name: string; bytes: Buffer }[], boundary: string): Buffer {
  return Buffer.concat([
    ...files.flatMap((f) => [Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="files"; filename="${f.name}"\r\nContent-Type: application/octet-stream\r\n\r\n`), f.bytes, Buffer.from('\r\n')]),
    Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="language"\r\n\r\npt\r\n--${boundary}--\r\n`),
  ]);
}

t.test('voice messages and sync files decode on the thread to the same PCM as on the calling thread', async (t) => {
  let thread: TaskThread<FileDecodeTask, FileDecodeAnswer> | undefined;
  const decoder = new FileDecoder(() => (thread = new TaskThread<FileDecodeTask, FileDecodeAnswer>(HANDLER)));
  t.teardown(() => decoder.close());
  const a = opusBin(3);
  const b = opusBin(1.5);
  const type = 'multipart/form-data; boundary=xyz';
  const body = form([{ name: `a_${TS}.bin`, bytes: a }, { name: `b_${TS}_fs320.bin`, bytes: b }], 'xyz');

  const here = readVoiceUpload(type, {}, body, NOW_MS);
  const there = await decoder.voice(type, {}, body, NOW_MS);
  t.equal(there.language, 'pt', 'the form\'s language');
  t.equal(there.pcm.length, here.pcm.length);
  t.ok(Buffer.from(there.pcm.buffer, there.pcm.byteOffset, there.pcm.byteLength).equals(Buffer.from(here.pcm.buffer, here.pcm.byteOffset, here.pcm.byteLength)), 'sample for sample');
  t.equal(thread?.posted.tasks, 1, 'decoded on the thread');

  const expected = parseSyncFile(a, `rec_${TS}_fs320.bin`, NOW_MS).decode();
  // A file in a buffer it shares (a view into a larger one) is copied across and left as it was.
  const shared = new Uint8Array(a.byteLength + 16);
  shared.set(a, 8);
  const inShared = shared.subarray(8, 8 + a.byteLength);
  const fromShared = await decoder.sync(inShared, `rec_${TS}_fs320.bin`, NOW_MS);
  t.equal(inShared.byteLength, a.byteLength, 'a view into a shared buffer stays the caller\'s');
  // A file filling its own buffer (as a file just read does) is moved: no copy, the caller's view is left empty.
  const own = new Uint8Array(a);
  const synced = await decoder.sync(own, `rec_${TS}_fs320.bin`, NOW_MS);
  t.equal(own.byteLength, 0, 'a file in a buffer of its own is moved, not copied');
  for (const pcm of [synced, fromShared]) {
    t.same([pcm.length, Buffer.from(pcm.buffer).equals(Buffer.from(expected.buffer, expected.byteOffset, expected.byteLength))], [expected.length, true], 'a sync file too');
  }
});

t.test('with the gate asked for, a voice message is decoded and checked for speech in one crossing', async (t) => {
  let thread: TaskThread<FileDecodeTask, FileDecodeAnswer> | undefined;
  const decoder = new FileDecoder(() => (thread = new TaskThread<FileDecodeTask, FileDecodeAnswer>(HANDLER)));
  t.teardown(() => decoder.close());
  const dir = t.testdir();
  const { params } = new SpeechCheck();
  const wavForm = (pcm: Int16Array): Buffer => form([{ name: 'm.wav', bytes: readFileSync(writeWav(dir, `m${pcm.length}`, pcm, 16000)) }], 'b0');
  const type = 'multipart/form-data; boundary=b0';
  const spoken = await decoder.voice(type, {}, wavForm(speak(dir, 'Remind me to buy milk on the way home.')), NOW_MS, params);
  t.equal(spoken.speech, 'speech');
  const quiet = await decoder.voice(type, {}, wavForm(silence(3)), NOW_MS, params);
  t.equal(quiet.speech, 'silence');
  t.equal(quiet.pcm.length, 48000, 'and the PCM');
  t.equal((await decoder.voice(type, {}, wavForm(silence(1)), NOW_MS)).speech, undefined, 'not asked: not checked');
  t.equal(thread?.posted.tasks, 3, 'one task each');
});

t.test('a sync batch\'s files are probed on the thread: start, length and hash as on the calling thread', async (t) => {
  let thread: TaskThread<FileDecodeTask, FileDecodeAnswer> | undefined;
  const decoder = new FileDecoder(() => (thread = new TaskThread<FileDecodeTask, FileDecodeAnswer>(HANDLER)));
  t.teardown(() => decoder.close());
  const a = opusBin(2);
  // A form's part: a view into the whole body, of which only the part crosses.
  const body = Buffer.concat([Buffer.alloc(1000, 1), a, Buffer.alloc(500, 2)]);
  const part = body.subarray(1000, 1000 + a.byteLength);
  const name = `rec_${TS}_fs320.bin`;
  const probed = await decoder.probe(part, name, NOW_MS);
  t.same(probed, probeSyncFile(a, name, NOW_MS));
  t.equal(probed.durationS, 2);
  t.equal(probed.startedAtMs, TS * 1000);
  t.equal(thread?.posted.tasks, 1, 'probed on the thread');
  t.equal(part.byteLength, a.byteLength, 'the part is still the caller\'s');
  await t.rejects(decoder.probe(part, 'no-timestamp.wav', NOW_MS), { name: 'AudioInputError' });
});

t.test('a bad file is refused with the reason the calling thread gives; the thread stays', async (t) => {
  const decoder = new FileDecoder();
  t.teardown(() => decoder.close());
  const junk = randomBytes(4000);
  const reason = (() => {
    try {
      parseSyncFile(junk, `rec_${TS}_fs320.bin`, NOW_MS).decode();
    } catch (err) {
      return (err as AudioInputError).reason;
    }
    return undefined;
  })();
  t.ok(reason, 'the file is bad');
  await t.rejects(decoder.sync(junk, `rec_${TS}_fs320.bin`, NOW_MS), new AudioInputError(reason!));
  await t.rejects(decoder.voice('text/plain', {}, Buffer.from('hello'), NOW_MS), { name: 'AudioInputError', reason: 'Content-Type must be multipart/form-data or application/octet-stream.' });
  t.equal((await decoder.sync(opusBin(1), `rec_${TS}_fs320.bin`, NOW_MS)).length, 16000, 'the next file decodes');
});

t.test('an error inside the thread is the service\'s, not the file\'s; a closed decoder refuses', async (t) => {
  let threads = 0;
  let current: TaskThread<FileDecodeTask, FileDecodeAnswer> | undefined;
  const decoder = new FileDecoder(() => {
    threads++;
    return (current = new TaskThread<FileDecodeTask, FileDecodeAnswer>(HANDLER));
  });
  t.teardown(() => decoder.close());
  t.equal((await decoder.sync(opusBin(1), `rec_${TS}_fs320.bin`, NOW_MS)).length, 16000);
  // A task the handler cannot take (no kind) throws inside the thread: an error that is not the file's reason.
  const broken = current!.run({ kind: 'sync' } as unknown as FileDecodeTask);
  const err = await broken.then(() => undefined, (e: unknown) => e);
  t.ok(err instanceof Error && !(err instanceof AudioInputError), 'rejected, and not as a bad file');
  await decoder.close();
  await t.rejects(decoder.sync(opusBin(1), `rec_${TS}_fs320.bin`, NOW_MS), /closed/, 'closed: refused, not a file error');
  t.equal(threads, 1, 'one thread for every file');
});
