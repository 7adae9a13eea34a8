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

const SETPRIV = ['/usr/bin/setpriv', '/bin/setpriv'].find((p) => fs.existsSync(p));

// Three free loopback ports: {http, tcp, inter}.
export async function chPorts() {
  return { http: await freePort(), tcp: await freePort(), inter: await freePort() };
}

// Server NAME in dir/NAME on ports ({http, tcp, inter}); `config` is XML put
// inside <yandex> (remote_servers, zookeeper, macros...), `users` XML put
// inside <users> after the default user, `profile` XML put inside the
// default settings profile (e.g. <log_queries>1</log_queries>). Resolves when it answers SELECT 1
// (60 s at most); the Proc has .url, .ports and .dir.
export async function startClickHouse(dir, name, ports, { config = '', users = '', profile = '' } = {}) {
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
  <profiles><default><max_memory_usage>2000000000</max_memory_usage>${profile}</default></profiles>
  <users><default><password></password><networks><ip>127.0.0.1</ip></networks><profile>default</profile><quota>default</quota></default>${users}</users>
  <quotas><default><interval><duration>3600</duration><queries>0</queries><errors>0</errors><result_rows>0</result_rows><read_rows>0</read_rows><execution_time>0</execution_time></interval></default></quotas>
</yandex>
`);
  // setpriv --pdeathsig: the server dies with this process, also when a
  // timeout kills it by a signal ('exit' handlers do not run then)
  const argv = ['nice', CH_BIN, `--config-file=${d}/config.xml`];
  const p = SETPRIV ? new Proc(name, SETPRIV, ['--pdeathsig', 'KILL', '--', ...argv], { cwd: d })
    : new Proc(name, argv[0], argv.slice(1), { cwd: d });
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

// A loopback TCP proxy in front of server: profd's requests go through it,
// and while it is shut (gate.shut()) the INSERTs profd sends (each on a
// connection of its own) are held, not forwarded, so the batch in flight
// waits until gate.open(); other queries pass. gate.held()
// is how many bytes are held now. Lets a test hold a batch in flight while
// it queues the next one, with no timing. close() ends it.
export async function chGate(server) {
  const net = await import('node:net');
  const upPort = Number(new URL(server.url).port);
  let shut = false;
  const waiting = []; // [socket, chunk]
  const conns = new Set();
  const srv = net.createServer((down) => {
    const up = net.connect(upPort, '127.0.0.1');
    conns.add(down).add(up);
    let insert = null; // an INSERT's connection (profd opens a fresh one for each)
    down.on('data', (d) => {
      if (insert === null) insert = /^POST [^\r\n]*[?&]query=INSERT/i.test(d.toString('latin1', 0, 512));
      if (shut && insert) waiting.push([up, d]); else up.write(d);
    });
    up.on('data', (d) => down.write(d));
    const end = () => { down.destroy(); up.destroy(); conns.delete(down); conns.delete(up); };
    down.on('close', end).on('error', end);
    up.on('close', end).on('error', end);
  });
  await new Promise((r) => srv.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${srv.address().port}`,
    shut() { shut = true; },
    open() { shut = false; for (const [s, d] of waiting.splice(0)) s.write(d); },
    held() { return waiting.reduce((n, [, d]) => n + d.length, 0); },
    close() { for (const s of conns) s.destroy(); srv.close(); },
  };
}
