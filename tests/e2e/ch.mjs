// Starts Debian's clickhouse-server (18.16) on loopback for the ClickHouse
// backend's e2e tests (clickhouse, clickhouse_replicas): one process per
// server, its own config.xml, users.xml and data under dir/NAME (reused when
// the same name is started again, as after a kill).
import fs from 'node:fs';
import path from 'node:path';
import { Proc, freePort, http, waitFor } from './lib.mjs';

// The server binary, or undefined when clickhouse-server is not installed.
export const CH_BIN = ['/usr/sbin/clickhouse-server', '/usr/bin/clickhouse-server', '/usr/bin/clickhouse']
  .find((p) => fs.existsSync(p));

// Three free loopback ports: {http, tcp, inter}.
export async function chPorts() {
  return { http: await freePort(), tcp: await freePort(), inter: await freePort() };
}

// Server NAME in dir/NAME on ports ({http, tcp, inter}); `config` is XML put
// inside <yandex> (remote_servers, zookeeper, macros...), `users` XML put
// inside <users> after the default user. Resolves when it answers SELECT 1
// (60 s at most); the Proc has .url, .ports and .dir.
export async function startClickHouse(dir, name, ports, { config = '', users = '' } = {}) {
  const d = path.join(dir, name);
  fs.mkdirSync(path.join(d, 'data'), { recursive: true });
  fs.writeFileSync(path.join(d, 'config.xml'), `<?xml version="1.0"?>
<yandex>
  <logger><level>warning</level><log>${d}/server.log</log><errorlog>${d}/err.log</errorlog><size>10M</size><count>1</count></logger>
  <http_port>${ports.http}</http_port>
  <tcp_port>${ports.tcp}</tcp_port>
  <interserver_http_port>${ports.inter}</interserver_http_port>
  <listen_host>127.0.0.1</listen_host>
  <path>${d}/data/</path>
  <tmp_path>${d}/tmp/</tmp_path>
  <user_files_path>${d}/user_files/</user_files_path>
  <format_schema_path>${d}/format_schemas/</format_schema_path>
  <mark_cache_size>67108864</mark_cache_size>
  <uncompressed_cache_size>0</uncompressed_cache_size>
  <max_concurrent_queries>50</max_concurrent_queries>
  <users_config>${d}/users.xml</users_config>
  <default_profile>default</default_profile>
  <default_database>default</default_database>
  <timezone>UTC</timezone>
${config}
</yandex>
`);
  fs.writeFileSync(path.join(d, 'users.xml'), `<?xml version="1.0"?>
<yandex>
  <profiles><default><max_memory_usage>2000000000</max_memory_usage></default></profiles>
  <users><default><password></password><networks><ip>127.0.0.1</ip></networks><profile>default</profile><quota>default</quota></default>${users}</users>
  <quotas><default><interval><duration>3600</duration><queries>0</queries><errors>0</errors><result_rows>0</result_rows><read_rows>0</read_rows><execution_time>0</execution_time></interval></default></quotas>
</yandex>
`);
  const p = new Proc(name, 'nice', [CH_BIN, `--config-file=${d}/config.xml`], { cwd: d });
  p.url = `http://127.0.0.1:${ports.http}`;
  p.ports = ports;
  p.dir = d;
  await waitFor(`${name} to answer SELECT 1`, async () => {
    if (p.exited) throw new Error(`${name} exited (${JSON.stringify(p.exited)})\n${p.tail()}`);
    const r = await http(`${p.url}/?query=SELECT%201`, { timeoutMs: 30000 }).catch(() => null);
    return r && r.status === 200;
  }, 60000, 250);
  return p;
}

// sql's answer (trimmed text) from server; throws naming the server on a non-200.
export async function chQuery(server, sql) {
  const r = await http(`${server.url}/`, { method: 'POST', body: sql, timeoutMs: 30000 });
  if (r.status !== 200) throw new Error(`${server.name}: ${sql}: HTTP ${r.status} ${r.text}`);
  return r.text.trim();
}
