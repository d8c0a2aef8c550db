// SIGTERM on each role of a running deployment, under load: a listen node refuses new sessions (1013), finishes its
// sessions' audio with the provider and closes them with 1012, and its devices resume on the other listen node without
// losing audio; a jobs node finishes (or hands back) its jobs; an api node answers the request it was reading.
import t from 'tap';
import net from 'node:net';
import { bearer } from '../helpers/http.js';
import { checkDeliveredOncePerConversation, endRecording, providerSeconds, startBusyDeployment, statusOf, transcriptWords, WORDS_PER_PROVIDER_SECOND } from '../helpers/multi-node.js';
import { until, waitFor } from '../helpers/until.js';

// Several service processes start here (migrations, Redis, codec threads each): slower than one in-process service.
t.setTimeout(360_000);

const DEVICES = 6;

/** A TCP connection to `port`, accepted before anything is sent on it. */
function connectRaw(port: number): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const s = net.connect(port, '127.0.0.1', () => resolve(s));
    s.on('error', reject);
  });
}

/** Everything the server sends on `s` until it closes it (or `done` says enough). */
function readAll(s: net.Socket, done: (b: Buffer) => boolean): Promise<Buffer> {
  return new Promise((resolve) => {
    let buf = Buffer.alloc(0);
    const finish = (): void => resolve(buf);
    s.on('data', (d: Buffer) => {
      buf = Buffer.concat([buf, d]);
      if (done(buf)) finish();
    });
    s.on('close', finish);
    s.on('error', finish);
  });
}

/** The close frame after a 101 answer: its code and reason. */
function closeFrame(b: Buffer): { status: string; code?: number; reason?: string } {
  const head = b.indexOf('\r\n\r\n');
  const status = b.subarray(0, b.indexOf('\r\n')).toString();
  if (head < 0) return { status };
  const f = b.subarray(head + 4);
  if (f.length < 4 || f[0] !== 0x88) return { status };
  const len = f[1]! & 0x7f;
  return { status, code: f.readUInt16BE(2), reason: f.subarray(4, 2 + len).toString() };
}

t.test('SIGTERM on each role under load: nothing lost, nothing done twice but under one webhook-id', async (t) => {
  // The receiver takes its time, so deliveries are under way when a jobs node stops.
  const busy = await startBusyDeployment(t, { prefix: 'drain', devices: DEVICES, answerMs: 200 });
  const { d, l0, l1, devices } = busy;
  const { api, provider } = d;
  const jobs0 = d.jobs;

  // --- listen: the provider holds its answers back a second, so the drain is still finishing when a new session comes.
  provider.fallback = { kind: 'accept', autoEveryS: 1, answerDelayMs: 1000 };
  await Promise.all(devices.map((dev) => dev.connect(l0)));
  for (const dev of devices) dev.start();
  await until(() => devices.every((dev) => dev.acked >= 1500), { what: 'a second and a half acknowledged on every device', timeoutMs: 30_000 });
  const l0Streams = [...provider.streams];
  provider.fallback = { kind: 'accept', autoEveryS: 1 };
  // A connection the node has taken (it answered a request on it) before the signal; the upgrade comes after.
  const late = await connectRaw(l0.port);
  const lateToken = await d.token('late-device');
  const health = readAll(late, (b) => b.includes('"status"'));
  late.write('GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n');
  t.match((await health).toString(), /^HTTP\/1\.1 200 OK/, 'the connection is taken');
  late.removeAllListeners('data');
  l0.child.kill('SIGTERM');
  await l0.logged('shutting down');
  const lateAnswer = readAll(late, (b) => closeFrame(b).code !== undefined);
  late.write(`GET /v4/listen?uid=late-device&codec=opus&sample_rate=16000 HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nAuthorization: Bearer ${lateToken}\r\n\r\n`);
  const refused = closeFrame(await lateAnswer);
  late.destroy();
  t.same(refused, { status: 'HTTP/1.1 101 Switching Protocols', code: 1013, reason: 'server shutting down' }, 'a session arriving during the drain: 1013');
  t.equal(await l0.exited, 0, 'the listen node exits 0');
  await until(() => devices.every((dev) => dev.node === l1 && dev.client !== undefined), { what: 'every device resumed on the other listen node', timeoutMs: 30_000 });
  for (const dev of devices) {
    t.same(dev.closes.map((c) => [c.node, c.code, c.reason]), [['listen-0', 1012, 'service restart: reconnect']], `${dev.uid}: drained with 1012`);
    t.same(dev.errors, [], `${dev.uid}: resumed`);
  }
  // Every provider stream of the drained node was asked for its last answer (the words check below finds them all).
  t.same(l0Streams.map((s) => s.controls.filter((c) => c !== 'KeepAlive')), l0Streams.map(() => ['Finalize', 'CloseStream']), "each of the drained node's provider streams was finalised, then closed");
  t.notOk(l0.lines.some((l) => l.msg === 'shutdown step did not finish in time'), 'no shutdown step ran out of time');

  // Streaming goes on on the other node; then every device stops and its audio is counted at the provider.
  await until(() => devices.every((dev) => dev.acked >= dev.sent * 20 - 200 && dev.sent >= 200), { what: 'four seconds recorded and acknowledged on every device', timeoutMs: 30_000 });
  await Promise.all(devices.map((dev) => dev.stop()));
  await Promise.all(devices.map((dev) => dev.allAcked()));
  const sentS = devices.reduce((n, dev) => n + dev.sent * 0.02, 0);
  const atProvider = await waitFor(() => {
    const s = providerSeconds(provider);
    return s >= sentS - 1e-6 ? s : undefined;
  }, { what: 'every second sent at the provider', timeoutMs: 30_000 }).catch(() => providerSeconds(provider));
  t.comment(`audio: ${sentS.toFixed(2)} s sent, ${atProvider.toFixed(2)} s at the provider, lost ${Math.max(0, sentS - atProvider).toFixed(2)} s, heard twice ${Math.max(0, atProvider - sentS).toFixed(2)} s`);
  t.ok(atProvider >= sentS - 1e-6, 'no audio lost across the drain');
  t.ok(atProvider - sentS <= 0.02 * DEVICES, 'at most a frame per device heard twice');

  // --- jobs: six conversations end at once; the first jobs node is stopped as the first of them completes.
  const ids = await Promise.all(devices.map((dev) => endRecording(api, dev.token)));
  const created = devices.map((dev) => dev.client!.json((m) => m.type === 'memory_created', 60_000));
  await Promise.race(created);
  jobs0.child.kill('SIGTERM');
  t.equal(await jobs0.exited, 0, 'the jobs node exits 0');
  const events = await Promise.all(created);
  devices.forEach((dev, i) => t.equal(events[i].memory.id, ids[i], `${dev.uid}: memory_created on the other listen node`));
  let words = 0;
  for (const [i, dev] of devices.entries()) {
    t.equal(await statusOf(api, dev.token, ids[i]!), 'completed', `${dev.uid}: processed`);
    words += await transcriptWords(api, dev.token, ids[i]!);
  }
  const said = provider.streams.reduce((n, s) => n + s.resultsSent, 0) * WORDS_PER_PROVIDER_SECOND;
  t.equal(words, said, `every word the provider said is in a transcript (${words})`);
  for (const dev of devices) t.equal(dev.client!.frames.filter((f) => f.includes('"memory_created"')).length, 1, `${dev.uid}: processed once`);

  // Webhooks: at least once; a second attempt only under the same webhook-id.
  await checkDeliveredOncePerConversation(t, busy, ids);

  // --- api: a request whose body is still arriving when SIGTERM comes is answered; then the node exits 0.
  const slow = await connectRaw(api.port);
  const body = JSON.stringify({ name: 'created while the node stops' });
  const answer = readAll(slow, (b) => b.toString().includes('"key"'));
  // uWS answers `100 Continue` as it hands the request to its route: from then on the request is in flight.
  slow.write(`POST /v1/dev/keys HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${devices[0]!.token}\r\nContent-Type: application/json\r\nExpect: 100-continue\r\nContent-Length: ${body.length}\r\n\r\n`);
  let seen = '';
  slow.on('data', (b: Buffer) => (seen += b.toString()));
  await until(() => seen.startsWith('HTTP/1.1 100 Continue'), { what: '100 Continue', timeoutMs: 20_000 });
  api.child.kill('SIGTERM');
  await api.logged('shutting down');
  slow.write(body);
  const answered = (await answer).toString().replace(/^HTTP\/1\.1 100 Continue\r\n\r\n/, '');
  slow.destroy();
  t.match(answered, /^HTTP\/1\.1 200 OK/, 'the request in flight is answered');
  t.equal(await api.exited, 0, 'the api node exits 0');
  t.equal((await l1.req('/v1/dev/keys', { headers: bearer(devices[0]!.token) })).json.length, 1, 'the key it created is there, read on another node');

  for (const dev of devices) dev.client?.close();
});
