// REDIS_URL's cluster form: the seed nodes and credentials it names, and the start-up error for one that is wrong.
import t from 'tap';
import { ConfigError, loadConfig } from '../../engine/config.js';
import { isClusterUrl, parseClusterUrl } from '../../engine/redis-url.js';
import { bullPrefix } from '../../engine/jobs/queues.js';

t.test('a cluster URL names its seed nodes, credentials and TLS', async (t) => {
  t.same(parseClusterUrl('redis+cluster://10.0.0.1:7000,10.0.0.2:7001/'), { nodes: [{ host: '10.0.0.1', port: 7000 }, { host: '10.0.0.2', port: 7001 }], username: undefined, password: undefined, tls: false });
  t.same(parseClusterUrl('rediss+cluster://app:p%40ss@cache-a,[::1]:7002'), { nodes: [{ host: 'cache-a', port: 6379 }, { host: '::1', port: 7002 }], username: 'app', password: 'p@ss', tls: true });
  t.same(parseClusterUrl('redis+cluster://:secret@h:1/'), { nodes: [{ host: 'h', port: 1 }], username: undefined, password: 'secret', tls: false }, 'a password alone');
  t.equal(isClusterUrl('REDIS+CLUSTER://h:1/'), true);
  t.equal(isClusterUrl('redis://h:1/'), false);
});

t.test('REDIS_URL: a wrong cluster form stops start-up naming the variable and what is wrong', async (t) => {
  const bad: [string, RegExp][] = [
    ['redis+cluster://', /node "" that is not host:port/],
    ['redis+cluster://h1:7000,h2:port/', /node "h2:port"/],
    ['redis+cluster://h1:70000/', /node "h1:70000"/],
    ['redis+cluster://h1:7000/2', /must look like redis\+cluster:\/\/host1:port1,host2:port2\//],
    ['redis+cluster://h1:7000/?tls=1', /must look like/],
    ['http://cache:6379', /must use redis:\/\/ or rediss:\/\/, or redis\+cluster:\/\//],
  ];
  for (const [url, why] of bad) {
    const err = (() => {
      try {
        loadConfig({ REDIS_URL: url });
      } catch (e) {
        return e;
      }
      return undefined;
    })();
    t.ok(err instanceof ConfigError && err.variable === 'REDIS_URL', `${url}: refused naming REDIS_URL`);
    t.match((err as Error | undefined)?.message, why, `${url}: says why`);
  }
  t.equal(loadConfig({ REDIS_URL: 'redis+cluster://h1:7000,h2:7001/' }).redisUrl, 'redis+cluster://h1:7000,h2:7001/', 'a good one is kept as given');
});

t.test('BullMQ keys are hash-tagged on a cluster and unchanged on one server', async (t) => {
  t.equal(bullPrefix('redis+cluster://h1:7000/', 'svc'), '{svc}');
  t.equal(bullPrefix('redis://h1:6379', 'svc'), 'svc');
});
