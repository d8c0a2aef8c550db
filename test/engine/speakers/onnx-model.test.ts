// SPEAKER_MODEL_PATH: an ONNX speaker model the test writes itself (fbank band variances times a fixed matrix) runs on
// the embedding thread and gives the vector worked out here; models of the wrong shape stop start-up with a clear
// error; the model's name (file name and hash) is stored with embeddings, and switching models recomputes them from
// the kept audio, on sqlite and PostgreSQL.
import { createHash } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { Writable } from 'node:stream';
import pino from 'pino';
import t from 'tap';
import { loadConfig } from '../../../engine/config.js';
import { Service } from '../../../engine/app.js';
import { Voiceprints } from '../../../engine/db/voiceprints.js';
import { createEmbeddingService } from '../../../engine/speakers/embedding-service.js';
import { cosineSimilarity, normalise } from '../../../engine/speakers/embedding.js';
import { FBANK_BANDS, FeatureExtractor, fbank } from '../../../workers/speaker-features.js';
import { onnxModel, varianceModel } from '../../helpers/onnx.js';
import { startService } from '../../helpers/service.js';
import { STORES, openTestStore } from '../../helpers/stores.js';
import { SENTENCES, voice } from '../../helpers/voices.js';

const dir = t.testdir();
const DIMENSION = 16;
const good = varianceModel(DIMENSION);
const goodPath = path.join(dir, 'speaker.onnx');
writeFileSync(goodPath, good.bytes);
const sha256 = createHash('sha256').update(good.bytes).digest('hex');
const alice = voice(dir, 'alice', 'en-us+f2', SENTENCES[0]!);
const bob = voice(dir, 'bob', 'en-us+m3', SENTENCES[1]!);

/** What the model must answer for `pcm`, worked out here: band variances of the fbank times the matrix, normalised. */
function expected(pcm: Int16Array): Float32Array {
  const { frames, values } = fbank(new FeatureExtractor(FBANK_BANDS, 8000), pcm);
  const out = new Float32Array(DIMENSION);
  for (let b = 0; b < FBANK_BANDS; b++) {
    let variance = 0;
    for (let f = 0; f < frames; f++) variance += values[f * FBANK_BANDS + b]! ** 2;
    variance /= frames;
    for (let d = 0; d < DIMENSION; d++) out[d] = out[d]! + variance * good.weights[b * DIMENSION + d]!;
  }
  return normalise(out);
}

function modelFile(name: string, bytes: Buffer): string {
  const file = path.join(dir, name);
  writeFileSync(file, bytes);
  return file;
}

t.test('the model runs on the embedding thread and answers the vector worked out by hand', async (t) => {
  const service = createEmbeddingService({ modelPath: goodPath });
  t.teardown(() => service.close());
  t.equal(service.model, `speaker.onnx@${sha256.slice(0, 12)}`, 'named by file and hash');
  t.equal(service.dimension, 0, 'width unknown before the model loads');
  t.same(await service.load(), { model: service.model, dimension: DIMENSION, sha256 });
  const a = await service.embed(alice);
  t.equal(a.length, DIMENSION);
  t.ok(Math.abs(Math.hypot(...a) - 1) < 1e-5, 'unit length');
  const want = expected(alice);
  t.ok(a.every((x, i) => Math.abs(x - want[i]!) < 1e-4), 'the fbank and the model agree with the reference');
  t.ok(cosineSimilarity(a, await service.embed(bob)) < 0.9999, 'another voice gives another vector');
  t.same(await service.embed(new Int16Array(800)), new Float32Array(DIMENSION), 'under 0.1 s of audio embeds to zeros');
});

t.test('models that do not fit the contract are refused, saying why', async (t) => {
  const cases: [string, Buffer, RegExp][] = [
    ['40 bands', varianceModel(DIMENSION, { bands: 40 }).bytes, /must take float32 \[1, frames, 80\], takes float32 \[1, frames, 40\]/],
    [
      'per-frame output',
      onnxModel({
        input: { name: 'feats', shape: [1, 'frames', 80] },
        output: { name: 'embs', shape: [1, 'frames', DIMENSION] },
        nodes: [{ op: 'MatMul', inputs: ['feats', 'w'], outputs: ['embs'] }],
        initializers: [{ name: 'w', dims: [80, DIMENSION], values: new Float32Array(80 * DIMENSION) }],
      }),
      /output must be float32 \[1, D\], got float32 \[1, 200, 16\]/,
    ],
    ['not ONNX', Buffer.from('this is not a model'), /is not a loadable ONNX model/],
  ];
  // Each on a thread of its own, at once: starting a thread is what takes the time.
  await Promise.all(cases.map(async ([name, bytes, message]) => {
    const service = createEmbeddingService({ modelPath: modelFile(`${name.replace(/\W/g, '-')}.onnx`, bytes) });
    await t.rejects(service.load(), message, name);
    await service.close();
  }));
});

t.test('start-up loads the model and logs its SHA-256; a wrong one stops it', async (t) => {
  const lines: Record<string, unknown>[] = [];
  const sink = new Writable({ write(chunk: Buffer, _enc, done) { lines.push(JSON.parse(chunk.toString())); done(); } });
  const s = await startService(t, { env: { SPEAKER_MODEL_PATH: goodPath }, logger: pino({ level: 'info' }, sink) });
  t.equal(s.service.services.speakerEmbeddings.model, `speaker.onnx@${sha256.slice(0, 12)}`);
  t.equal(s.service.services.speakerEmbeddings.dimension, DIMENSION);
  t.match(lines.find((l) => l.msg === 'speaker model loaded'), { sha256, dimension: DIMENSION, model: `speaker.onnx@${sha256.slice(0, 12)}` });

  const config = loadConfig({ ...s.env, SPEAKER_MODEL_PATH: modelFile('wrong.onnx', varianceModel(DIMENSION, { bands: 40 }).bytes) });
  await t.rejects(Service.start({ config, logger: pino({ level: 'silent' }) }), { name: 'ConfigError', message: /^SPEAKER_MODEL_PATH: speaker model .*wrong\.onnx must take float32 \[1, frames, 80\]/ });
});

for (const store of STORES) {
  t.test(`switching models recomputes stored embeddings from the kept audio (${store})`, async (t) => {
    const knex = openTestStore(t, store);
    await knex.migrate();
    const builtin = createEmbeddingService();
    const model = createEmbeddingService({ modelPath: goodPath });
    t.teardown(async () => {
      await builtin.close();
      await model.close();
    });
    const before = new Voiceprints(knex.knex, builtin);
    await before.setProfile('u1', alice, alice.length / 16000);
    const person = await before.createPerson('u1', 'Bob');
    await before.addPersonSample('u1', person.id, { pcm: bob, sampleRate: 16000 });
    t.equal((await before.getProfile('u1'))!.embedding.length, builtin.dimension);

    const after = new Voiceprints(knex.knex, model);
    const profile = (await after.getProfile('u1'))!;
    t.equal(profile.model, model.model);
    t.ok(profile.embedding.every((x, i) => Math.abs(x - expected(alice)[i]!) < 1e-4), "the profile's vector is the new model's, from the kept audio");
    const stored = await knex.knex('speech_profiles').where({ uid: 'u1' }).first('embedding_model');
    t.equal(stored.embedding_model, model.model, 'and is stored with its name');
    const [print] = await after.listPeopleEmbeddings('u1');
    t.match(print, { personId: person.id, name: 'Bob', model: model.model });
    t.ok(print!.embedding.every((x, i) => Math.abs(x - expected(bob)[i]!) < 1e-4), "the person's print too");
    const samples = await knex.knex('person_samples').select('embedding_model');
    t.same(samples.map((r: { embedding_model: string }) => r.embedding_model), [model.model]);

    const back = new Voiceprints(knex.knex, builtin);
    t.equal((await back.getProfile('u1'))!.embedding.length, builtin.dimension, 'and back again');
    t.equal((await back.listPeopleEmbeddings('u1'))[0]!.model, builtin.model);
  });
}
