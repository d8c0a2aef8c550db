// Voiceprints: a user's speech profile, the people they know and each person's voice samples, every one with the
// audio its embedding came from.
//
// Rationale: an embedding is stored with the name of the model that computed it; a read that finds another model's
// vector recomputes it from the kept audio and stores the new one, so changing SPEAKER_MODEL_PATH needs no migration
// step and old vectors are never compared with new ones. A person's print is the normalised mean of its samples'
// embeddings, rewritten whenever its samples change.
import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import type { EmbeddingService } from '../speakers/embedding-service.js';
import { meanEmbedding } from '../speakers/embedding.js';
import { isoNow } from './store.js';

/** Rate of all stored voice audio (16-bit mono PCM). */
export const VOICE_SAMPLE_RATE = 16000;
/** People one user may have. */
export const MAX_PEOPLE = 500;
/** Voice samples kept per person: a new one beyond this replaces the oldest, so a print follows the voice as it is now. */
export const MAX_SAMPLES_PER_PERSON = 20;
/** Longest voice sample kept, in seconds: a longer clip is cut to its middle. */
export const MAX_SAMPLE_SECONDS = 10;
/** Longest person name, in characters. */
export const MAX_PERSON_NAME_CHARS = 100;

export interface SpeechProfile {
  embedding: Float32Array;
  model: string;
  speechSeconds: number;
  updatedAt: Date;
}

export interface PersonRecord {
  id: string;
  name: string;
  createdAt: string;
  updatedAt: string;
  sampleCount: number;
}

export interface SampleRecord {
  id: string;
  personId: string;
  seconds: number;
  conversationId: string | null;
  segmentId: string | null;
  createdAt: string;
}

export interface PersonSampleInput {
  pcm: Int16Array;
  sampleRate: 16000;
  conversationId?: string | null;
  segmentId?: string | null;
}

/** The people list is full: MAX_PEOPLE. */
export class PeopleLimitError extends Error {
  override readonly name = 'PeopleLimitError';
  constructor() {
    super(`at most ${MAX_PEOPLE} people per user`);
  }
}

type Blob = Buffer | Uint8Array;

/** PCM as stored: its bytes, little-endian. */
const pcmBytes = (pcm: Int16Array): Buffer => Buffer.from(pcm.buffer, pcm.byteOffset, pcm.byteLength);
const vectorBytes = (v: Float32Array): Buffer => Buffer.from(v.buffer, v.byteOffset, v.byteLength);

/** Stored bytes into a fresh, aligned array (a driver's Buffer may start at any offset of a shared pool). */
function pcmOf(bytes: Blob): Int16Array {
  const out = new Int16Array(bytes.length >> 1);
  new Uint8Array(out.buffer).set(bytes.subarray(0, out.length * 2));
  return out;
}

function vectorOf(bytes: Blob): Float32Array {
  const out = new Float32Array(bytes.length >> 2);
  new Uint8Array(out.buffer).set(bytes.subarray(0, out.length * 4));
  return out;
}

/** The name as looked up: trimmed, case folded. */
export const nameKey = (name: string): string => name.trim().toLocaleLowerCase('en-US');

interface ProfileRow {
  uid: string;
  audio?: Blob;
  speech_seconds: number;
  embedding: Blob | null;
  embedding_model: string | null;
  created_at: string;
  updated_at: string;
}

interface PersonRow {
  id: string;
  uid: string;
  name: string;
  embedding?: Blob | null;
  embedding_model?: string | null;
  created_at: string;
  updated_at: string;
  sample_count?: number | string;
}

interface SampleRow {
  id: string;
  uid: string;
  person_id: string;
  audio?: Blob;
  seconds: number;
  conversation_id: string | null;
  segment_id: string | null;
  embedding?: Blob | null;
  embedding_model?: string | null;
  created_at: string;
}

const toPerson = (r: PersonRow): PersonRecord => ({
  id: r.id,
  name: r.name,
  createdAt: r.created_at,
  updatedAt: r.updated_at,
  // PostgreSQL returns count(*) as a string (bigint).
  sampleCount: Number(r.sample_count ?? 0),
});

const toSample = (r: SampleRow): SampleRecord => ({
  id: r.id,
  personId: r.person_id,
  seconds: Number(r.seconds),
  conversationId: r.conversation_id,
  segmentId: r.segment_id,
  createdAt: r.created_at,
});

/** The middle `maxSamples` of `pcm` (all of it when shorter). */
function middle(pcm: Int16Array, maxSamples: number): Int16Array {
  if (pcm.length <= maxSamples) return pcm;
  const start = (pcm.length - maxSamples) >> 1;
  return pcm.subarray(start, start + maxSamples);
}

export class Voiceprints {
  readonly #knex: Knex;
  readonly #embeddings: EmbeddingService;
  readonly #now: () => number;

  /** @param embeddings computes every stored embedding; its `model` names them. */
  constructor(knex: Knex, embeddings: EmbeddingService, now: () => number = Date.now) {
    this.#knex = knex;
    this.#embeddings = embeddings;
    this.#now = now;
  }

  // ── speech profile ────────────────────────────────────────────────────────────────────────────────────────────

  /** Replaces the user's profile with `pcm` (the speech the print is made of) and its embedding. */
  async setProfile(uid: string, pcm: Int16Array, speechSeconds: number): Promise<SpeechProfile> {
    const embedding = await this.#embeddings.embed(pcm);
    const at = isoNow(this.#now());
    const row = { uid, audio: pcmBytes(pcm), speech_seconds: speechSeconds, embedding: vectorBytes(embedding), embedding_model: this.#embeddings.model, created_at: at, updated_at: at };
    await this.#knex('speech_profiles').insert(row).onConflict('uid').merge(['audio', 'speech_seconds', 'embedding', 'embedding_model', 'updated_at']);
    return { embedding, model: this.#embeddings.model, speechSeconds, updatedAt: new Date(at) };
  }

  async hasProfile(uid: string): Promise<boolean> {
    return (await this.#knex('speech_profiles').where({ uid }).first('uid')) !== undefined;
  }

  /** The profile's embedding for the running model (recomputed from the kept audio if another model made it), or null. */
  async getProfile(uid: string): Promise<SpeechProfile | null> {
    const row = (await this.#knex('speech_profiles').where({ uid }).first('uid', 'speech_seconds', 'embedding', 'embedding_model', 'created_at', 'updated_at')) as ProfileRow | undefined;
    if (row === undefined) return null;
    const model = this.#embeddings.model;
    if (row.embedding !== null && row.embedding_model === model) {
      return { embedding: vectorOf(row.embedding), model, speechSeconds: Number(row.speech_seconds), updatedAt: new Date(row.updated_at) };
    }
    const audio = await this.profileAudio(uid);
    if (audio === null) return null;
    const embedding = await this.#embeddings.embed(audio);
    // Only the vector changes: the profile is as old as its audio.
    await this.#knex('speech_profiles').where({ uid }).update({ embedding: vectorBytes(embedding), embedding_model: model });
    return { embedding, model, speechSeconds: Number(row.speech_seconds), updatedAt: new Date(row.updated_at) };
  }

  /** The speech the profile was made of (16 kHz mono), or null. */
  async profileAudio(uid: string): Promise<Int16Array | null> {
    const row = (await this.#knex('speech_profiles').where({ uid }).first('audio')) as { audio: Blob } | undefined;
    return row === undefined ? null : pcmOf(row.audio);
  }

  /** Removes the profile's audio and embedding; false when there was none. */
  async deleteProfile(uid: string): Promise<boolean> {
    return (await this.#knex('speech_profiles').where({ uid }).delete()) > 0;
  }

  // ── people ────────────────────────────────────────────────────────────────────────────────────────────────────

  #people(): Knex.QueryBuilder {
    const count = this.#knex('person_samples as s').count('*').whereRaw('s.person_id = p.id').as('sample_count');
    return this.#knex('people as p').select('p.id', 'p.uid', 'p.name', 'p.created_at', 'p.updated_at', count);
  }

  /** Oldest first, ties by id. */
  async listPeople(uid: string): Promise<PersonRecord[]> {
    const rows = (await this.#people().where('p.uid', uid).orderBy([{ column: 'p.created_at' }, { column: 'p.id' }])) as PersonRow[];
    return rows.map(toPerson);
  }

  async getPerson(uid: string, id: string): Promise<PersonRecord | null> {
    const row = (await this.#people().where({ 'p.uid': uid, 'p.id': id }).first()) as PersonRow | undefined;
    return row === undefined ? null : toPerson(row);
  }

  /** The user's oldest person of that name, case and surrounding spaces aside. */
  async findPersonByName(uid: string, name: string): Promise<{ id: string; name: string } | null> {
    const row = (await this.#knex('people').where({ uid, name_key: nameKey(name) }).orderBy([{ column: 'created_at' }, { column: 'id' }]).first('id', 'name')) as { id: string; name: string } | undefined;
    return row ?? null;
  }

  /** Adds a person (name trimmed; the caller bounds its length). Throws PeopleLimitError past MAX_PEOPLE. */
  async createPerson(uid: string, name: string): Promise<{ id: string; name: string }> {
    const at = isoNow(this.#now());
    const trimmed = name.trim();
    const row = { id: randomUUID(), uid, name: trimmed, name_key: nameKey(trimmed), created_at: at, updated_at: at };
    await this.#knex.transaction(async (trx) => {
      const [{ n }] = (await trx('people').where({ uid }).count({ n: '*' })) as [{ n: number | string }];
      if (Number(n) >= MAX_PEOPLE) throw new PeopleLimitError();
      await trx('people').insert(row);
    });
    return { id: row.id, name: trimmed };
  }

  async renamePerson(uid: string, id: string, name: string): Promise<boolean> {
    const trimmed = name.trim();
    return (await this.#knex('people').where({ uid, id }).update({ name: trimmed, name_key: nameKey(trimmed), updated_at: isoNow(this.#now()) })) > 0;
  }

  /** Deletes the person with its samples' audio and its print. */
  async deletePerson(uid: string, id: string): Promise<boolean> {
    return this.#knex.transaction(async (trx) => {
      await trx('person_samples').where({ uid, person_id: id }).delete();
      return (await trx('people').where({ uid, id }).delete()) > 0;
    });
  }

  /**
   * Prints of the user's people that have voice samples, for the running model: a print another model made is
   * recomputed from the samples' audio first.
   */
  async listPeopleEmbeddings(uid: string): Promise<Array<{ personId: string; name: string; embedding: Float32Array; model: string }>> {
    const model = this.#embeddings.model;
    const rows = (await this.#knex('people as p')
      .where('p.uid', uid)
      .whereExists(this.#knex('person_samples as s').select('s.id').whereRaw('s.person_id = p.id'))
      .orderBy([{ column: 'p.created_at' }, { column: 'p.id' }])
      .select('p.id', 'p.name', 'p.embedding', 'p.embedding_model')) as PersonRow[];
    const out: Array<{ personId: string; name: string; embedding: Float32Array; model: string }> = [];
    for (const r of rows) {
      let embedding = r.embedding != null && r.embedding_model === model ? vectorOf(r.embedding) : await this.#recompute(uid, r.id);
      if (embedding === null) continue;
      out.push({ personId: r.id, name: r.name, embedding, model });
    }
    return out;
  }

  // ── voice samples ─────────────────────────────────────────────────────────────────────────────────────────────

  /**
   * Adds a voice sample to the user's person (the middle MAX_SAMPLE_SECONDS of it), dropping the oldest beyond
   * MAX_SAMPLES_PER_PERSON, and rewrites the person's print. Null when the person is not the user's.
   */
  async addPersonSample(uid: string, personId: string, sample: PersonSampleInput): Promise<{ sampleId: string } | null> {
    if (sample.sampleRate !== VOICE_SAMPLE_RATE) throw new RangeError(`voice samples are ${VOICE_SAMPLE_RATE} Hz`);
    if (sample.pcm.length === 0) throw new RangeError('a voice sample needs audio');
    if ((await this.#knex('people').where({ uid, id: personId }).first('id')) === undefined) return null;
    const pcm = middle(sample.pcm, MAX_SAMPLE_SECONDS * VOICE_SAMPLE_RATE);
    const embedding = await this.#embeddings.embed(pcm);
    const id = randomUUID();
    const inserted = await this.#knex.transaction(async (trx) => {
      // The person may have been deleted while its sample was embedded.
      if ((await trx('people').where({ uid, id: personId }).first('id')) === undefined) return false;
      await trx('person_samples').insert({
        id,
        uid,
        person_id: personId,
        audio: pcmBytes(pcm),
        seconds: pcm.length / VOICE_SAMPLE_RATE,
        conversation_id: sample.conversationId ?? null,
        segment_id: sample.segmentId ?? null,
        embedding: vectorBytes(embedding),
        embedding_model: this.#embeddings.model,
        created_at: isoNow(this.#now()),
      });
      const keep = trx('person_samples').select('id').where({ person_id: personId }).orderBy([{ column: 'created_at', order: 'desc' }, { column: 'id', order: 'desc' }]).limit(MAX_SAMPLES_PER_PERSON);
      // Wrapped once more: MySQL-style engines refuse LIMIT in an IN subquery, and sqlite and PostgreSQL accept this form.
      await trx('person_samples').where({ person_id: personId }).whereNotIn('id', trx.select('id').from(keep.as('k'))).delete();
      return true;
    });
    if (!inserted) return null;
    await this.#recompute(uid, personId);
    return { sampleId: id };
  }

  /** The person's samples, oldest first; null when the person is not the user's. */
  async listSamples(uid: string, personId: string): Promise<SampleRecord[] | null> {
    if ((await this.#knex('people').where({ uid, id: personId }).first('id')) === undefined) return null;
    const rows = (await this.#knex('person_samples')
      .where({ uid, person_id: personId })
      .orderBy([{ column: 'created_at' }, { column: 'id' }])
      .select('id', 'uid', 'person_id', 'seconds', 'conversation_id', 'segment_id', 'created_at')) as SampleRow[];
    return rows.map(toSample);
  }

  /** A sample's audio (16 kHz mono), or null when it is not one of the user's person's. */
  async sampleAudio(uid: string, personId: string, sampleId: string): Promise<Int16Array | null> {
    const row = (await this.#knex('person_samples').where({ uid, person_id: personId, id: sampleId }).first('audio')) as { audio: Blob } | undefined;
    return row === undefined ? null : pcmOf(row.audio);
  }

  /** Deletes a sample and rewrites the person's print; false when it is not one of the user's person's. */
  async deleteSample(uid: string, personId: string, sampleId: string): Promise<boolean> {
    const deleted = (await this.#knex('person_samples').where({ uid, person_id: personId, id: sampleId }).delete()) > 0;
    if (deleted) await this.#recompute(uid, personId);
    return deleted;
  }

  /** Everything voice-related of a user: profile, people, samples. */
  async deleteUser(uid: string): Promise<void> {
    await this.#knex.transaction(async (trx) => {
      await trx('person_samples').where({ uid }).delete();
      await trx('people').where({ uid }).delete();
      await trx('speech_profiles').where({ uid }).delete();
    });
  }

  /**
   * Re-embeds the person's samples another model made, then stores the mean of all of them as the print (null and
   * no print when no samples are left). Answers the print.
   */
  async #recompute(uid: string, personId: string): Promise<Float32Array | null> {
    const model = this.#embeddings.model;
    const stale = (await this.#knex('person_samples')
      .where({ uid, person_id: personId })
      .where((q) => q.whereNull('embedding_model').orWhereNot('embedding_model', model))
      .select('id', 'audio')) as Array<{ id: string; audio: Blob }>;
    for (const s of stale) {
      const embedding = await this.#embeddings.embed(pcmOf(s.audio));
      await this.#knex('person_samples').where({ id: s.id }).update({ embedding: vectorBytes(embedding), embedding_model: model });
    }
    return this.#knex.transaction(async (trx) => {
      // Locks the person row on PostgreSQL so two sample changes at once write their prints in turn.
      const query = trx('people').where({ uid, id: personId });
      const person = await (trx.client.dialect === 'postgresql' ? query.forUpdate() : query).first('id');
      if (person === undefined) return null;
      const rows = (await trx('person_samples').where({ person_id: personId, embedding_model: model }).select('embedding')) as Array<{ embedding: Blob }>;
      const vectors = rows.map((r) => vectorOf(r.embedding));
      const print = vectors.length === 0 ? null : meanEmbedding(vectors, vectors[0]!.length);
      await trx('people').where({ id: personId }).update({ embedding: print === null ? null : vectorBytes(print), embedding_model: print === null ? null : model });
      return print;
    });
  }
}
