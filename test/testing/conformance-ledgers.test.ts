/**
 * poolLedgerConformance against every ledger we ship (MachineLedger on a temp
 * dir, NatsPoolLedger on a real nats-server, MemoryPoolLedger) and against
 * deliberately broken ledgers, each of which must fail a check.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import type { ResourceAmount, ResourceCap } from 'scaler-primitives/resources';
import {
  type ConformanceCheck,
  ConformanceSkipped,
  MemoryPoolLedger,
  MemoryPoolStore,
  poolLedgerConformance,
} from 'scaler-primitives/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MachineLedger } from '../../src/ledger/file/machine-ledger.js';
import { NatsPoolLedger } from '../../src/ledger/nats/nats-pool-ledger.js';
import type {
  AdoptRequest,
  AdoptResult,
  LeaseEvent,
  LeaseInfo,
  PoolLedger,
  RegisterPoolOptions,
  ReleaseOptions,
  ReservationRow,
  ReserveOptions,
  ReserveResult,
} from '../../src/ledger/types.js';
import { type NatsServer, startNatsServer } from '../helpers/nats-server.js';
import { hasSystem } from '../helpers/system.js';
import { startTcpProxy, type TcpProxy } from '../helpers/tcp-proxy.js';

/** The lease checks that need the suite's `failRenewals` option (lease-events, -peers, -own-outage). */
const LEASE_FAULT_CHECKS = poolLedgerConformance(() => {
  throw new Error('not called');
})
  .map((check) => check.name)
  .filter((name) =>
    /^(renewals that fail|a peer takes the rows|no instance judges others)/.test(name),
  );

describe('poolLedgerConformance: MachineLedger (temp dir)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'sp-conformance-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  // A short lease: a peer judges a closed instance's lease only once it has
  // renewed its own for leaseTtlMs + margin (here 1 s + 1 s, within the check's 10 s).
  // The lease checks that need failing renewals run in conformance-machine-lease.test.ts
  // (a faulty file system under the ledger); here every other check runs.
  const checks = poolLedgerConformance(
    ({ instanceId }) => new MachineLedger({ instanceId, dir, leaseTtlMs: 1000 }),
  );
  const withoutFaults = checks.filter((check) => !LEASE_FAULT_CHECKS.includes(check.name));
  it('the suite has the three lease checks that need failing renewals', () => {
    expect(LEASE_FAULT_CHECKS).toHaveLength(3);
    expect(checks.length - withoutFaults.length).toBe(3);
  });
  for (const check of withoutFaults) {
    it(check.name, check.run);
  }
});

describe('poolLedgerConformance: MemoryPoolLedger (one shared store)', () => {
  const store = new MemoryPoolStore();
  for (const check of poolLedgerConformance(
    ({ instanceId }) =>
      new MemoryPoolLedger({ instanceId, store, leaseTtlMs: 1500, leaseMarginMs: 300 }),
    { failRenewals: (ledger, on) => (ledger as MemoryPoolLedger).failRenewals(on) },
  )) {
    it(check.name, check.run);
  }
});

const natsOk = hasSystem(['nats-server'], 'poolLedgerConformance against nats-server');

describe.runIf(natsOk)('poolLedgerConformance: NatsPoolLedger (real nats-server)', () => {
  let server: NatsServer;
  let nc: NatsConnection;
  beforeAll(async () => {
    server = await startNatsServer();
    nc = await connect({ servers: server.url });
  });
  afterAll(async () => {
    await nc?.close();
    await server?.stop();
  });
  // Each instance reaches the server through a TCP proxy of its own: failing its
  // renewals cuts that proxy (a real outage of one client), healing lets it reconnect.
  const proxies = new Map<PoolLedger, TcpProxy>();
  const connections: NatsConnection[] = [];
  let hosts = 0;
  afterAll(async () => {
    await Promise.all(connections.map((c) => c.close().catch(() => {})));
    await Promise.all([...proxies.values()].map((p) => p.close()));
  });
  for (const check of poolLedgerConformance(
    async ({ instanceId }) => {
      const proxy = await startTcpProxy(server.port);
      const own = await connect({
        servers: proxy.url,
        reconnectTimeWait: 100,
        maxReconnectAttempts: -1,
        pingInterval: 500,
      });
      connections.push(own);
      // Each ledger as if on a host of its own: the restart checks open an
      // instance id again while its first ledger still runs in this process,
      // which on one host is refused (LedgerInstanceInUseError); from another
      // host the newcomer continues the lease and fences the first.
      const ledger = await NatsPoolLedger.connect({
        nc: own,
        instanceId,
        bootId: `conformance-host-${hosts++}`,
        leaseMs: 1500,
        leaseMarginMs: 300,
        timeoutMs: 1000,
      });
      proxies.set(ledger, proxy);
      return ledger;
    },
    {
      failRenewals: (ledger, on) => {
        const proxy = proxies.get(ledger)!;
        if (on) proxy.cut();
        else proxy.heal();
      },
    },
  )) {
    it(check.name, check.run);
  }
});

// ---------------------------------------------------------------- broken ledgers

/** Delegates everything to a MemoryPoolLedger; subclasses break one promise. */
class Delegate implements PoolLedger {
  constructor(protected readonly inner: MemoryPoolLedger) {}
  registerPool(name: string, cap: ResourceCap, options?: RegisterPoolOptions): void {
    this.inner.registerPool(name, cap, options);
  }
  tryReserve(
    pool: string,
    agentId: string,
    cpus: number,
    memBytes: number,
    options?: ReserveOptions,
  ): Promise<boolean> {
    return this.reserve(pool, agentId, cpus, memBytes, options).then((r) => r.ok);
  }
  reserve(
    pool: string,
    agentId: string,
    cpus: number,
    memBytes: number,
    options?: ReserveOptions,
  ): Promise<ReserveResult> {
    return this.inner.reserve(pool, agentId, cpus, memBytes, options);
  }
  adopt(pool: string, agents: readonly AdoptRequest[]): Promise<AdoptResult[]> {
    return this.inner.adopt(pool, agents);
  }
  release(pool: string, agentId: string, options?: ReleaseOptions): Promise<boolean> {
    return this.inner.release(pool, agentId, options);
  }
  reapStale(pool: string): Promise<number> {
    return this.inner.reapStale(pool);
  }
  getUsage(pool: string): Promise<ResourceAmount> {
    return this.inner.getUsage(pool);
  }
  list(pool: string): Promise<ReservationRow[]> {
    return this.inner.list(pool);
  }
  start(intervalMs?: number): void {
    this.inner.start(intervalMs);
  }
  stop(): void {
    this.inner.stop();
  }
  releaseAllForInstance(): Promise<void> {
    return this.inner.releaseAllForInstance();
  }
  close(): Promise<void> {
    return this.inner.close();
  }
}

/** The honest delegate, with the lease methods too. */
class LeaseDelegate extends Delegate {
  lease(): LeaseInfo {
    return this.inner.lease();
  }
  onLeaseEvent(listener: (event: LeaseEvent) => void): () => void {
    return this.inner.onLeaseEvent(listener);
  }
}

/** Says what its lease is, but never tells a listener anything. */
class SilentLease extends LeaseDelegate {
  override onLeaseEvent(): () => void {
    return () => {};
  }
}

/** Reports a deadline a lease later than the truth. */
class LateDeadline extends LeaseDelegate {
  override lease(): LeaseInfo {
    const info = this.inner.lease();
    return { ...info, deadline: info.deadline! + info.leaseMs };
  }
}

/** Grants one unit over the cap in each dimension. */
class OverCap extends Delegate {
  override registerPool(name: string, cap: ResourceCap): void {
    this.inner.registerPool(name, {
      ...(cap.maxCpu === undefined ? {} : { maxCpu: cap.maxCpu + 1 }),
      ...(cap.maxMemoryBytes === undefined ? {} : { maxMemoryBytes: cap.maxMemoryBytes + 2 ** 30 }),
    });
  }
}

/** When memory does not fit, grants the CPU part anyway (and reports the refusal). */
class PartialGrant extends Delegate {
  override async reserve(pool: string, agentId: string, cpus: number, memBytes: number) {
    const result = await this.inner.reserve(pool, agentId, cpus, memBytes);
    if (!result.ok && result.dimension === 'memory') {
      await this.inner.reserve(pool, agentId, cpus, 0);
    }
    return result;
  }
}

/** A second release of the same agent says it removed something. */
class ReleaseNotIdempotent extends Delegate {
  override async release(pool: string, agentId: string, options?: ReleaseOptions) {
    await this.inner.release(pool, agentId, options);
    return true;
  }
}

/** Removes whichever instance's row (the old contract). */
class ReleasesOthers extends Delegate {
  override release(pool: string, agentId: string) {
    return this.inner.release(pool, agentId, { anyInstance: true });
  }
}

/** Never assigns device ids: the cap it registers lists none. */
class IgnoresDevices extends Delegate {
  override registerPool(name: string, cap: ResourceCap, options?: RegisterPoolOptions): void {
    const { devices: _devices, ...rest } = cap;
    this.inner.registerPool(name, rest, options);
  }
}

/** Answers the first ids of the cap for every grant, whatever the row holds. */
class AnswersFirstIds extends Delegate {
  override async reserve(
    pool: string,
    agentId: string,
    cpus: number,
    memBytes: number,
    options?: ReserveOptions,
  ): Promise<ReserveResult> {
    const result = await this.inner.reserve(pool, agentId, cpus, memBytes, options);
    if (!result.ok || result.devices === undefined) return result;
    const devices = Object.fromEntries(
      Object.entries(result.devices).map(([name, ids]) => [name, ids.map((_, i) => String(i))]),
    );
    return { ok: true, devices };
  }
}

/** Registers every pool without its device ids' order (sorted backwards). */
class IgnoresIdOrder extends Delegate {
  override registerPool(name: string, cap: ResourceCap, options?: RegisterPoolOptions): void {
    const devices =
      cap.devices &&
      Object.fromEntries(Object.entries(cap.devices).map(([n, ids]) => [n, [...ids].sort()]));
    this.inner.registerPool(name, devices ? { ...cap, devices } : cap, options);
  }
}

const skipped = new Map<ConformanceCheck[], string[]>();

async function failures(checks: ConformanceCheck[]): Promise<Map<string, string>> {
  const failed = new Map<string, string>();
  const skips: string[] = [];
  skipped.set(checks, skips);
  for (const check of checks) {
    try {
      await check.run();
    } catch (error) {
      if (error instanceof ConformanceSkipped) skips.push(check.name);
      else failed.set(check.name, error instanceof Error ? error.message : String(error));
    }
  }
  return failed;
}

// Real time: a lease long enough that a busy machine's timer delays stay well within its last third.
const steady = { leaseTtlMs: 1500, leaseMarginMs: 300 };
// For the broken ledgers, which fail their check whatever the timing.
const short = { leaseTtlMs: 600, leaseMarginMs: 150 };
const faults = {
  failRenewals: (ledger: PoolLedger, on: boolean) =>
    (ledger as unknown as { inner: MemoryPoolLedger }).inner.failRenewals(on),
};

describe('poolLedgerConformance can fail: each broken ledger fails a check', () => {
  const broken: Array<[string, new (inner: MemoryPoolLedger) => Delegate, RegExp[]]> = [
    [
      'grants one over the cap',
      OverCap,
      [/never exceed the cpu cap/, /never exceed the memory cap/],
    ],
    ['grants partially', PartialGrant, [/refused reserve writes nothing/]],
    ['release not idempotent', ReleaseNotIdempotent, [/release is idempotent/]],
    ["releases another instance's row", ReleasesOthers, [/cannot release the first one's row/]],
    [
      'assigns no device ids',
      IgnoresDevices,
      [/each grant answers and stores the lowest free ids/, /never give one device id to two rows/],
    ],
    ['answers ids its rows do not hold', AnswersFirstIds, [/never give one device id to two rows/]],
    ['ignores the order of device ids', IgnoresIdOrder, [/is a cap mismatch/]],
  ];

  it('the honest delegate passes every check (so failures below come from the breakage); without lease() the lease checks are skipped, not passed', async () => {
    const store = new MemoryPoolStore();
    const checks = poolLedgerConformance(
      ({ instanceId }) => new Delegate(new MemoryPoolLedger({ instanceId, store })),
    );
    const failed = await failures(checks);
    expect([...failed]).toEqual([]);
    const skips = skipped.get(checks)!;
    expect(skips.length).toBe(5);
    expect(skips.every((name) => checks.find((c) => c.name === name))).toBe(true);
    // The lease checks come last in the suite.
    expect(skips).toEqual(checks.slice(-5).map((c) => c.name));
  });

  it('the honest delegate with lease() and onLeaseEvent passes the lease checks too', async () => {
    const store = new MemoryPoolStore();
    const checks = poolLedgerConformance(
      ({ instanceId }) => new LeaseDelegate(new MemoryPoolLedger({ instanceId, store, ...steady })),
      faults,
    );
    const failed = await failures(checks);
    expect([...failed]).toEqual([]);
    expect(skipped.get(checks)).toEqual([]);
  });

  it("a skipped check goes through the runner's skip when it has one, and never resolves as a pass without", async () => {
    const store = new MemoryPoolStore();
    const checks = poolLedgerConformance(
      ({ instanceId }) => new LeaseDelegate(new MemoryPoolLedger({ instanceId, store, ...short })),
    ); // no failRenewals: the fault checks do not apply
    const events = checks.find((c) => c.name.startsWith('renewals that fail'))!;
    const notes: unknown[] = [];
    await events.run({ skip: (note) => notes.push(note) }); // node:test style: skip() returns
    expect(notes).toEqual(['the suite was given no `failRenewals` option to make renewals fail']);
    const error = await events.run().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConformanceSkipped);
    expect((error as Error).message).toMatch(/^Skipped \(not passed\): renewals that fail/);
    expect(events.run.length).toBe(0); // jest would take a parameter for a done callback
  });

  it.each([
    ['never fires a lease event', SilentLease, /renewals that fail/],
    ['reports a wrong deadline', LateDeadline, /lease\(\) describes/],
  ] as const)('a ledger whose lease %s fails', async (_what, Broken, expected) => {
    const store = new MemoryPoolStore();
    const failed = await failures(
      poolLedgerConformance(
        ({ instanceId }) => new Broken(new MemoryPoolLedger({ instanceId, store, ...short })),
        faults,
      ),
    );
    expect(
      [...failed.keys()].some((name) => expected.test(name)),
      [...failed.keys()].join('; '),
    ).toBe(true);
  });

  it.each(broken)('a ledger that %s fails', async (_what, Broken, expected) => {
    const store = new MemoryPoolStore();
    const failed = await failures(
      poolLedgerConformance(
        ({ instanceId }) => new Broken(new MemoryPoolLedger({ instanceId, store })),
      ),
    );
    expect(failed.size).toBeGreaterThan(0);
    for (const pattern of expected) {
      expect(
        [...failed.keys()].some((name) => pattern.test(name)),
        String(pattern),
      ).toBe(true);
    }
  });

  it('a failed check says what was expected and what was found', async () => {
    const store = new MemoryPoolStore();
    const failed = await failures(
      poolLedgerConformance(
        ({ instanceId }) => new ReleaseNotIdempotent(new MemoryPoolLedger({ instanceId, store })),
      ),
    );
    expect(failed.get('release is idempotent and answers whether a row was removed')).toBe(
      'second release of x: expected false, got true',
    );
  });
});

describe('poolLedgerConformance options', () => {
  it('refuses a bad factory, unknown options and bad values', () => {
    expect(() => poolLedgerConformance(undefined as never)).toThrow(TypeError);
    const make = () => new MemoryPoolLedger({ instanceId: 'x' });
    expect(() => poolLedgerConformance(make, { prefix: 'a/b' })).toThrow(/prefix/);
    expect(() => poolLedgerConformance(make, { instances: 1 })).toThrow(/instances/);
    expect(() => poolLedgerConformance(make, { pools: 3 } as never)).toThrow(/Unknown/);
  });

  it('calls the factory once per instance with a fresh instance id, and uses its own pools', async () => {
    const store = new MemoryPoolStore();
    const seen: string[] = [];
    const checks = poolLedgerConformance(
      ({ instanceId, check }) => {
        seen.push(`${check}|${instanceId}`);
        return new MemoryPoolLedger({ instanceId, store });
      },
      { prefix: 'mine' },
    );
    for (const check of checks) {
      await check.run().catch((error: unknown) => {
        if (!(error instanceof ConformanceSkipped)) throw error;
      });
    }
    // The adopt checks open one instance id twice on purpose: the host after a restart.
    const adopts = checks.filter((c) => c.name.startsWith('adopt ')).map((c) => c.name);
    expect(adopts).toHaveLength(2);
    const once = seen.filter((s) => !adopts.some((adopt) => s.startsWith(`${adopt}|`)));
    expect(new Set(once).size).toBe(once.length);
    for (const adopt of adopts) {
      expect(seen.filter((s) => s.startsWith(`${adopt}|`))).toHaveLength(3);
    }
    expect(seen.every((s) => s.includes('|mine-'))).toBe(true);
    expect(store.pools().every((p) => p.startsWith('mine-'))).toBe(true);
    expect(new Set(checks.map((c) => c.name)).size).toBe(checks.length);
  });
});
