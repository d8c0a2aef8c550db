// SIGKILL on each role of a running deployment, under load (the crash case): devices resume on the other listen node
// from their last acknowledgement, a killed jobs node's job is run by the other one (BullMQ's stalled-job check,
// shortened to a second here), webhooks stay at least once under one webhook-id, and a request cut short can be sent
// again to another node.
import t from 'tap';
import net from 'node:net';
import { fileURLToPath } from 'node:url';
import { bearer } from '../helpers/http.js';
import { checkDeliveredOncePerConversation, endRecording, providerSeconds, startBusyDeployment, statusOf } from '../helpers/multi-node.js';
import { until } from '../helpers/until.js';

// Several service processes start here (migrations, Redis, codec threads each): slower than one in-process service.
t.setTimeout(360_000);

const ENTRY = fileURLToPath(new URL('../helpers/fast-recovery-node.js', import.meta.url));
const DEVICES = 6;

t.test('SIGKILL on each role under load: devices resume, every conversation processed, webhooks at least once', async (t) => {
  const busy = await startBusyDeployment(t, { prefix: 'kill', devices: DEVICES, answerMs: 100, entry: ENTRY });
  const { d, l0, l1, devices } = busy;
  const { api, provider } = d;
  const jobs0 = d.jobs;

  // --- listen: killed while six devices stream to it.
  await Promise.all(devices.map((dev) => dev.connect(l0)));
  for (const dev of devices) dev.start();
  await until(() => devices.every((dev) => dev.acked >= 1500), { what: 'a second and a half acknowledged on every device', timeoutMs: 30_000 });
  // Between two acknowledgements (the node writes and syncs its logs once a second): audio in flight is unacknowledged.
  await until(() => devices.every((dev) => dev.sent * 20 - dev.acked >= 300), { what: 'unacknowledged audio on every device', timeoutMs: 30_000 });
  const ackedAtKill = devices.map((dev) => dev.acked);
  const sentAtKill = devices.map((dev) => dev.sent);
  l0.child.kill('SIGKILL');
  t.equal(await l0.exited, null, 'the listen node is gone');
  await until(() => devices.every((dev) => dev.node === l1 && dev.client !== undefined), { what: 'every device resumed on the other listen node', timeoutMs: 30_000 });
  for (const dev of devices) {
    t.same(dev.closes.map((c) => [c.node, c.code]), [['listen-0', 1006]], `${dev.uid}: the connection dropped without a close frame`);
    t.same(dev.errors, [], `${dev.uid}: resumed`);
  }
  await until(() => devices.every((dev) => dev.sent >= 200), { what: 'four seconds recorded on every device', timeoutMs: 30_000 });
  await Promise.all(devices.map((dev) => dev.stop()));
  await Promise.all(devices.map((dev) => dev.allAcked()));
  const sentS = devices.reduce((n, dev) => n + dev.sent * 0.02, 0);
  // What the killed node had received but not yet acknowledged came again from the devices; what it had written to its
  // log past the last stored segment is not heard live again (another node's sweep hands it to kept audio later).
  const unacked = devices.reduce((n, _dev, i) => n + (sentAtKill[i]! * 20 - ackedAtKill[i]!) / 1000, 0);
  await until(() => providerSeconds(provider) >= sentS - unacked - 2 * DEVICES, { what: 'the audio at the provider', timeoutMs: 30_000 }).catch(() => undefined);
  const atProvider = providerSeconds(provider);
  t.comment(`audio: ${sentS.toFixed(2)} s sent, ${atProvider.toFixed(2)} s heard live by the provider: ${Math.max(0, sentS - atProvider).toFixed(2)} s not heard live, ${Math.max(0, atProvider - sentS).toFixed(2)} s heard twice (${unacked.toFixed(2)} s were unacknowledged at the kill)`);
  t.ok(sentS - atProvider <= 2 * DEVICES, 'at most the last couple of seconds per device were not heard live');
  t.ok(atProvider - sentS <= unacked + 0.02 * DEVICES, 'heard twice: at most what was unacknowledged at the kill');

  // --- jobs: six conversations end at once; the first jobs node is killed as the first of them completes.
  const ids = await Promise.all(devices.map((dev) => endRecording(api, dev.token)));
  const created = devices.map((dev) => dev.client!.json((m) => m.type === 'memory_created', 60_000));
  await Promise.race(created);
  jobs0.child.kill('SIGKILL');
  const events = await Promise.all(created);
  devices.forEach((dev, i) => t.equal(events[i].memory.id, ids[i], `${dev.uid}: memory_created`));
  for (const [i, dev] of devices.entries()) {
    await until(async () => (await statusOf(api, dev.token, ids[i]!)) === 'completed', { what: `${dev.uid}: processed`, timeoutMs: 30_000 });
  }
  const announced = devices.map((dev) => dev.client!.frames.filter((f) => f.includes('"memory_created"')).length);
  t.comment(`memory_created per device: ${announced.join(', ')} (a job cut short by the kill may be announced twice)`);
  t.ok(announced.every((n) => n >= 1), 'every conversation announced');

  await checkDeliveredOncePerConversation(t, busy, ids);

  // --- api: killed while it reads a request; the client sends it again to another node.
  const slow = await new Promise<net.Socket>((resolve, reject) => {
    const s = net.connect(api.port, '127.0.0.1', () => resolve(s));
    s.on('error', reject);
  });
  let seen = '';
  const gone = new Promise<void>((r) => slow.on('close', () => r()));
  slow.on('data', (b: Buffer) => (seen += b.toString()));
  slow.on('error', () => undefined);
  const body = JSON.stringify({ name: 'sent twice' });
  slow.write(`POST /v1/dev/keys HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${devices[0]!.token}\r\nContent-Type: application/json\r\nExpect: 100-continue\r\nContent-Length: ${body.length}\r\n\r\n`);
  await until(() => seen.startsWith('HTTP/1.1 100 Continue'), { what: '100 Continue', timeoutMs: 20_000 });
  api.child.kill('SIGKILL');
  await gone;
  t.equal(seen, 'HTTP/1.1 100 Continue\r\n\r\n', 'no answer: the connection closed');
  const again = await l1.req('/v1/dev/keys', { method: 'POST', headers: bearer(devices[0]!.token), body: { name: 'sent twice' } });
  t.equal(again.status, 200, 'sent again to another node, it is answered');
  t.equal((await l1.req('/v1/dev/keys', { headers: bearer(devices[0]!.token) })).json.length, 1, 'one key: the request cut short did nothing');

  for (const dev of devices) dev.client?.close();
});
