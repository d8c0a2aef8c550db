// REDIS_URL forms: a single server (`redis://`, `rediss://`) or a Redis Cluster given by some of its nodes
// (`redis+cluster://[user:password@]host1:port1,host2:port2/`, `rediss+cluster://` for TLS). No dependencies, so
// configuration can validate the setting at start-up.

/** A Redis Cluster's seed nodes and credentials, read from a `redis+cluster://` URL. */
export interface ClusterUrl {
  readonly nodes: readonly { host: string; port: number }[];
  readonly username: string | undefined;
  readonly password: string | undefined;
  readonly tls: boolean;
}

export const CLUSTER_URL_FORM = 'redis+cluster://host1:port1,host2:port2/';

const CLUSTER = /^(rediss?)\+cluster:\/\/(?:([^@/?#]*)@)?([^/?#@]*)\/?$/i;

/** True when `url` names a Redis Cluster rather than one server. */
export function isClusterUrl(url: string): boolean {
  return /^rediss?\+cluster:/i.test(url);
}

/** The seed nodes of a cluster URL; throws an Error saying what is wrong with it. */
export function parseClusterUrl(url: string): ClusterUrl {
  const m = CLUSTER.exec(url);
  if (!m) throw new Error(`must look like ${CLUSTER_URL_FORM} (no database number, no query)`);
  const [, scheme, userinfo, hosts] = m as unknown as [string, string, string | undefined, string];
  let username: string | undefined;
  let password: string | undefined;
  if (userinfo !== undefined) {
    const colon = userinfo.indexOf(':');
    const user = decodeURIComponent(colon < 0 ? userinfo : userinfo.slice(0, colon));
    username = user === '' ? undefined : user;
    password = colon < 0 ? undefined : decodeURIComponent(userinfo.slice(colon + 1));
  }
  const nodes = hosts.split(',').map((part) => {
    // host:port, [v6]:port, or a bare host on the default port.
    const n = /^(\[[0-9a-fA-F:.]+\]|[^:[\]\s]+)(?::(\d{1,5}))?$/.exec(part.trim());
    const port = n?.[2] === undefined ? 6379 : Number(n[2]);
    if (!n || port < 1 || port > 65535) throw new Error(`has a node "${part}" that is not host:port`);
    return { host: n[1]!.replace(/^\[|\]$/g, ''), port };
  });
  return { nodes, username, password, tls: scheme.toLowerCase() === 'rediss' };
}
