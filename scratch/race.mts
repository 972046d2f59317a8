import { jetstream } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { connect } from '@nats-io/transport-node';
import { freePort, startNatsServer } from '../test/helpers/nats-server.ts';
const routes = [await freePort(), await freePort(), await freePort()];
const servers = await Promise.all(routes.map((port, i) => startNatsServer({ cluster: { name: 'c', port, routes, serverName: `n${i}` } })));
const ncs = await Promise.all(servers.map((s) => connect({ servers: s.url })));
let kv;
for (;;) { try { kv = await new Kvm(ncs[0]).create('b', { replicas: 3 }); break; } catch { await new Promise(r => setTimeout(r, 200)); } }
const jss = ncs.map((nc) => jetstream(nc));
async function round(useId: boolean, k: string) {
  const r = await kv.put(k, 'base');
  const results = await Promise.allSettled(Array.from({ length: 12 }, (_, i) => jss[i % 3].publish(`$KV.b.${k}`, `w${i}`, { expect: { lastSubjectSequence: r }, ...(useId ? { msgID: `${k}:${r}` } : {}) })));
  const ok = results.filter((x) => x.status === 'fulfilled' && !(x.value as any).duplicate).length;
  const dup = results.filter((x) => x.status === 'fulfilled' && (x.value as any).duplicate).length;
  return { ok, dup };
}
for (const useId of [false, true]) {
  let multi = 0, dups = 0; const n = 150;
  for (let i = 0; i < n; i++) { const { ok, dup } = await round(useId, `k${i}`); if (ok > 1) multi++; dups += dup; }
  console.log(useId ? 'with msgID' : 'plain', 'rounds with >1 accepted:', multi, 'of', n, 'duplicate acks', dups);
}
await Promise.all(ncs.map((nc) => nc.close()));
await Promise.all(servers.map((s) => s.stop()));
