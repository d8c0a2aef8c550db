// A codec stream as its shard sees it: its codec in numbers, the records staged for the next task, what its send plan
// holds out for, and the messages of its task in flight.
import { RecordWriter } from '../../workers/packing.js';

export class Staging {
  /** The stream's number, unique in the process (records and answers name it). */
  readonly key: number;
  /** The codec's number on the wire (workers/messages.ts CODECS), input rate and channels: a task's params. */
  readonly codecIndex: number;
  readonly sampleRate: number;
  readonly channels: number;
  /** The records staged for the shard's next task: a stream's own, so a task never reads held-back ones. */
  readonly records = new RecordWriter();
  /** Messages and bytes staged. */
  messages = 0;
  bytes = 0;
  /** 16 kHz samples the staged messages hold (counted only while the stream holds audio back). */
  samples = 0;
  /** When the oldest staged message came (performance.now() time). */
  since = 0;
  /** Samples to gather before the staged audio is due (the stream's send plan); 0: it goes in the next task. */
  hold = 0;
  /** The staged audio goes in the next task: enough of it is there, or nothing holds it back; and since when. */
  due = false;
  dueAt = 0;
  /** Messages and bytes of the task in flight. */
  inFlightMessages = 0;
  inFlightBytes = 0;
  /** Told each message as it leaves in a task, in order, lent for the call (CodecStream.keepEncoded()). */
  keep: ((message: Uint8Array) => void) | undefined = undefined;

  constructor(key: number, codecIndex: number, sampleRate: number, channels: number) {
    this.key = key;
    this.codecIndex = codecIndex;
    this.sampleRate = sampleRate;
    this.channels = channels;
  }

  /** Bytes pushed whose PCM has not come back (staged or being decoded). */
  get pendingBytes(): number {
    return this.bytes + this.inFlightBytes;
  }

  /** Nothing is staged or in flight. */
  get idle(): boolean {
    return this.messages === 0 && this.inFlightMessages === 0;
  }

  /** The staged messages leave in a task: they are in flight now. */
  sent(): void {
    this.inFlightMessages = this.messages;
    this.inFlightBytes = this.bytes;
    this.messages = this.bytes = this.samples = 0;
    this.due = false;
  }

  /** The task in flight was answered for: its message count, and none in flight after. */
  answered(): number {
    const messages = this.inFlightMessages;
    this.inFlightMessages = this.inFlightBytes = 0;
    return messages;
  }
}
