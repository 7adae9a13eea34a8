// Starts Debian's Prometheus and Alertmanager on loopback for the e2e tests
// that need a real one (rules, rules_alert, adaptive_alert, collect,
// operate). Each returns the Proc (killed by lib.mjs' killAll) with .port
// and .url set; `ready` waits for GET /-/ready = 200 and fails early if the
// process exited.
import path from 'node:path';
import { Proc, freePort, http, waitFor } from './lib.mjs';

// prometheus --config.file=CONFIG on 127.0.0.1:PORT (a free one when
// omitted), its TSDB in dir/prom; remoteWriteReceiver adds
// --web.enable-remote-write-receiver (profd's remote_write target).
export async function startPrometheus(dir, { config = path.join(dir, 'prometheus.yml'), port = null, remoteWriteReceiver = false, ready = false } = {}) {
  port = port || await freePort();
  const p = new Proc('prometheus', 'prometheus', [`--config.file=${config}`,
    `--web.listen-address=127.0.0.1:${port}`, `--storage.tsdb.path=${path.join(dir, 'prom')}`,
    ...(remoteWriteReceiver ? ['--web.enable-remote-write-receiver'] : [])]);
  p.port = port;
  p.url = `http://127.0.0.1:${port}`;
  if (ready) await waitReady(p, 'Prometheus');
  return p;
}

// prometheus-alertmanager --config.file=dir/am.yml on 127.0.0.1:PORT, its
// state in dir/am, clustering off.
export async function startAlertmanager(dir, { port = null, ready = false } = {}) {
  port = port || await freePort();
  const p = new Proc('alertmanager', 'prometheus-alertmanager', [`--config.file=${path.join(dir, 'am.yml')}`,
    `--storage.path=${path.join(dir, 'am')}`, `--web.listen-address=127.0.0.1:${port}`, '--cluster.listen-address=']);
  p.port = port;
  p.url = `http://127.0.0.1:${port}`;
  if (ready) await waitReady(p, 'Alertmanager');
  return p;
}

// Waits until p answers GET /-/ready with 200 (60 s at most).
export function waitReady(p, what) {
  return waitFor(`${what} to be ready`, async () => {
    if (p.exited) throw new Error(`${what} exited\n${p.tail()}`);
    const r = await http(`${p.url}/-/ready`, { timeoutMs: 30000 }).catch(() => null);
    return r && r.status === 200;
  }, 60000, 200);
}
