/**
 * leaseLostPolicy 'stop-agents' against a real MachineLedger in a temp dir,
 * whose every write fails for a while (an injected `fs` answering EROFS: as
 * root, chmod is not enough to make a directory unwritable). The manager must
 * destroy its pool agents before its lease's deadline, and a healthy peer may
 * take the capacity only after the deadline plus the margin: at no instant do
 * the agents running and the peer's grant exceed the pool.
 *
 * Runs only where MachineLedger has the optional lease methods (issue 31).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MachineLedger, type PoolLedger } from 'scaler-primitives/ledger';
import { type ScalerEvent, ScalerManager } from 'scaler-primitives/manager';
import { FakeBackend } from 'scaler-primitives/testing';
import { afterAll, describe, expect, it } from 'vitest';
import { faultyFs } from '../helpers/faulty-fs.js';

const hasLease =
  typeof (MachineLedger.prototype as Partial<PoolLedger>).onLeaseEvent === 'function' &&
  typeof (MachineLedger.prototype as Partial<PoolLedger>).lease === 'function';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function until(probe: () => boolean | Promise<boolean>, timeoutMs: number, what: string) {
  const end = Date.now() + timeoutMs;
  while (!(await probe())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

describe.runIf(hasLease)('leaseLostPolicy against a MachineLedger whose writes fail', () => {
  const dir = mkdtempSync(join(tmpdir(), 'sp-lease-outage-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('stop-agents destroys the pool agents before the deadline; the peer gets the pool only after deadline + margin; renewed, spawning resumes', async () => {
    const state = { down: false };
    const leaseTtlMs = 1500;
    const leaseMarginMs = 300;
    // (leaseMarginMs is an option of the MachineLedger that has lease methods.)
    const make = (extra: Record<string, unknown>) =>
      new MachineLedger({
        dir,
        leaseTtlMs,
        leaseMarginMs,
        ...extra,
      } as unknown as ConstructorParameters<typeof MachineLedger>[0]);
    const ledger = make({ instanceId: 'host-a', fs: faultyFs(state) });
    const peer = make({ instanceId: 'peer' });
    const backend = new FakeBackend({ name: 'vm' });
    const events: ScalerEvent[] = [];
    const manager = new ScalerManager({
      config: {
        globalMaxAgents: 10,
        machinePools: { host: { maxCpu: 2 } },
        scalers: [
          {
            name: 'vm',
            type: 'process',
            maxAgents: 4,
            machinePool: 'host',
            labelSets: [{ labels: ['linux'], resources: { cpus: 1 } }],
          },
        ],
      },
      backends: [{ name: 'vm', backend }],
      ledgers: { host: ledger },
      onEvent: (event) => events.push(event),
    });
    backend.attach(manager);
    peer.registerPool('host', { maxCpu: 2 });
    try {
      // The peer renews from now on (its lease is made by its first write).
      expect(await peer.reserve('host', 'peer-0', 0, 0)).toEqual({ ok: true });
      for (const job of ['j1', 'j2']) {
        const result = await manager.requestScale({ jobId: job, labels: ['linux'] });
        expect(result.kind).toBe('spawned');
        if (result.kind === 'spawned') {
          const request = backend.callsOf('spawn').at(-1)!.args[0] as {
            lease?: { location: { kind: string; path?: string }; leaseMs: number };
          };
          expect(request.lease?.location.kind).toBe('file');
          expect(request.lease?.leaseMs).toBe(leaseTtlMs);
        }
      }
      expect(backend.running()).toHaveLength(2);
      // Let the peer renew long enough to judge others (lease + margin).
      await sleep(leaseTtlMs + leaseMarginMs + 200);

      state.down = true;
      const atRisk = () => events.find((e) => e.kind === 'lease-at-risk');
      await until(() => atRisk() !== undefined, 3 * leaseTtlMs, 'lease-at-risk');
      const deadline = ((atRisk()!.data as { lease: unknown }).lease as { deadline: number })
        .deadline;
      await until(() => backend.running().length === 0, leaseTtlMs, 'the agents destroyed');
      const destroys = backend.callsOf('destroy');
      expect(destroys).toHaveLength(2);
      for (const call of destroys) expect(call.settledAt ?? call.at).toBeLessThan(deadline);
      expect(manager.getStatus().lease?.spawningStopped).toBe(true);
      expect((await manager.requestScale({ jobId: 'j3', labels: ['linux'] })).kind).toBe(
        'at-capacity',
      );

      // The peer takes the whole pool, but only after the deadline plus the margin.
      let grantedAt = 0;
      await until(
        async () => {
          await peer.reapStale('host');
          const granted = await peer.reserve('host', 'peer-1', 2, 0);
          if (granted.ok) grantedAt = Date.now();
          return granted.ok;
        },
        4 * leaseTtlMs,
        "the peer's grant",
      );
      expect(grantedAt).toBeGreaterThanOrEqual(deadline + leaseMarginMs);
      expect(backend.running()).toEqual([]); // capacity never used twice

      state.down = false;
      await until(
        () => events.some((e) => e.kind === 'lease-renewed'),
        2 * leaseTtlMs,
        'lease-renewed',
      );
      expect(await peer.release('host', 'peer-1')).toBe(true);
      const again = await manager.requestScale({ jobId: 'j4', labels: ['linux'] });
      expect(again.kind).toBe('spawned');
    } finally {
      state.down = false;
      await manager.shutdownAll();
      await ledger.close();
      await peer.releaseAllForInstance();
      await peer.close();
    }
  }, 30_000);
});
