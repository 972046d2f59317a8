// Issue 22, "sweep after a crash", end to end: a crashed controller left caps
// keys (real nats-server -js) and isolation rules (real nft in a throwaway
// network namespace) for agents that are gone and for one its backend still
// runs; the next controller's reconcile() removes exactly the dead agents'.
import type { KV } from '@nats-io/kv';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { capsFromResources } from 'scaler-primitives/agent-caps';
import {
  openOrCreateCapsBucket,
  sweepAgentCaps,
  writeAgentCaps,
} from 'scaler-primitives/agent-caps/nats';
import { type ScalerBackend, ScalerManager } from 'scaler-primitives/manager';
import {
  addIsolationRules,
  listIsolatedAgents,
  type NftOptions,
  sweepIsolation,
} from 'scaler-primitives/nftables';
import { FakeBackend, TestClock } from 'scaler-primitives/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type NatsServer, startNatsServer } from '../helpers/nats-server.js';
import { Namespaces } from '../helpers/netns.js';
import { hasSystem } from '../helpers/system.js';

const ok = hasSystem(['nats-server', 'nft', 'ip', 'root'], 'reconcile sweeps (system)');

async function keys(kv: KV): Promise<string[]> {
  const out: string[] = [];
  for await (const key of await kv.keys()) out.push(key);
  return out.sort();
}

describe.runIf(ok)('reconcile() sweeps caps keys and nft rules after a crash', () => {
  const spaces = new Namespaces('sp-sweep');
  let server: NatsServer;
  let nc: NatsConnection;
  let kv: KV;
  let nft: NftOptions;

  beforeAll(async () => {
    nft = { netns: spaces.add('reconcile') };
    server = await startNatsServer();
    nc = await connect({ servers: server.url });
    kv = await openOrCreateCapsBucket(nc);
  });

  afterAll(async () => {
    await nc?.close();
    await server?.stop();
    spaces.cleanup();
  });

  it('removes the dead agents’ leftovers and keeps the live, the spawning and the untracked', async () => {
    // What the crashed run left: caps and rules for two dead agents and one survivor.
    let iface = 0;
    const leave = async (agent: string) => {
      await writeAgentCaps(kv, agent, { cpuQuota: '100%' });
      await addIsolationRules(agent, { iifname: `veth-s${++iface}` }, nft);
    };
    for (const agent of ['old-dead-1', 'old-dead-2', 'old-survivor']) await leave(agent);

    // The new controller: its backend writes caps and rules on spawn, and still
    // runs the survivor (listed, untracked).
    const clock = new TestClock('2026-01-05T09:00:00Z');
    const fake = new FakeBackend({ clock, name: 'linux' });
    const backend: ScalerBackend = {
      async spawn(request) {
        await fake.spawn(request);
        await writeAgentCaps(kv, request.agentId, capsFromResources(request.resources.limits));
        await addIsolationRules(request.agentId, { iifname: `veth-s${++iface}` }, nft);
      },
      destroy: (agentId) => fake.destroy(agentId),
      list: async () => [...(await fake.list()), 'old-survivor'],
    };
    let n = 0;
    const manager = new ScalerManager({
      config: {
        globalMaxAgents: 4,
        scalers: [
          {
            name: 'linux',
            type: 'container',
            maxAgents: 4,
            // CPU only: the memory limit is unset, and the caps say so.
            labelSets: [{ labels: ['linux'], resources: { cpus: 2 } }],
          },
        ],
      },
      backends: [{ name: 'linux', backend }],
      clock,
      generateAgentId: () => `new-${++n}`,
      sweeps: {
        agentCaps: (live) => sweepAgentCaps(kv, live),
        isolation: (live) => sweepIsolation(live, nft),
      },
    });
    fake.attach(manager);
    expect((await manager.requestScale({ jobId: 'job-1', labels: ['linux'] })).kind).toBe(
      'spawned',
    );
    expect((await kv.get('new-1'))?.string()).toBe('{"cpu_quota":"200%"}');

    const result = await manager.reconcile();
    expect(result.sweeps).toEqual([
      { name: 'agentCaps', removedAgents: ['old-dead-1', 'old-dead-2'] },
      { name: 'isolation', removedAgents: ['old-dead-1', 'old-dead-2'] },
    ]);
    expect(await keys(kv)).toEqual(['new-1', 'old-survivor']);
    expect((await listIsolatedAgents(nft)).map((a) => a.agentId)).toEqual([
      'new-1',
      'old-survivor',
    ]);
    // A second pass finds nothing more.
    expect((await manager.reconcile()).sweeps?.map((s) => s.removedAgents)).toEqual([[], []]);
    await manager.shutdownAll();
  });
});
