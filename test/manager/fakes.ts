/**
 * Test doubles for the manager: a backend that records calls and can be told to
 * fail or hang, and an in-memory PoolLedger with the real contract's answers.
 */
import type { PoolLedger, ReservationRow, ReserveResult } from '../../src/ledger/index.js';
import type { ScalerBackend, SpawnRequest } from '../../src/manager/index.js';
import type { ResourceAmount, ResourceCap } from '../../src/resources/index.js';

export class FakeBackend implements ScalerBackend {
  readonly spawned: SpawnRequest[] = [];
  readonly destroyed: string[] = [];
  /** Agents the backend says it runs (spawned minus destroyed, unless edited). */
  readonly running = new Set<string>();
  /** Agents whose spawn call has not answered yet (they may be starting). */
  readonly starting = new Set<string>();
  /** When set, destroy waits for this promise before answering. */
  destroyGate: Promise<void> | undefined;
  failNext = 0;
  failDestroy = false;
  /** When set, spawn waits for this promise before answering. */
  gate: Promise<void> | undefined;
  shutdowns = 0;
  shutdown: (() => Promise<void>) | undefined;
  onSpawn: ((request: SpawnRequest) => void) | undefined;

  async spawn(request: SpawnRequest) {
    this.spawned.push(request);
    this.starting.add(request.agentId);
    this.onSpawn?.(request);
    try {
      if (this.gate) await this.gate;
      if (this.failNext > 0) {
        this.failNext--;
        throw new Error(`boom spawning ${request.agentId}`);
      }
    } finally {
      this.starting.delete(request.agentId);
    }
    this.running.add(request.agentId);
    return { context: { handle: `h-${request.agentId}` } };
  }

  /** True while the agent may run: spawn in flight, or spawned and not destroyed. */
  mayRun(agentId: string): boolean {
    return this.starting.has(agentId) || this.running.has(agentId);
  }

  async destroy(agentId: string) {
    if (this.destroyGate) await this.destroyGate;
    if (this.failDestroy) throw new Error(`boom destroying ${agentId}`);
    this.destroyed.push(agentId);
    this.running.delete(agentId);
  }

  async list() {
    return [...this.running];
  }
}

/** A backend without list() or shutdown(). */
export function minimalBackend(): ScalerBackend & { spawned: SpawnRequest[] } {
  const spawned: SpawnRequest[] = [];
  return {
    spawned,
    async spawn(request) {
      spawned.push(request);
    },
    async destroy() {},
  };
}

export function deferred() {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

export class FakeLedger implements PoolLedger {
  readonly caps = new Map<string, ResourceCap>();
  readonly rows = new Map<string, Map<string, ResourceAmount>>();
  failReserve: Error | undefined;
  failRelease: Error | undefined;
  started = 0;
  stopped = 0;
  releasedAllForInstance = 0;
  /** Extra usage held by "another process". */
  readonly foreign = new Map<string, ResourceAmount>();

  registerPool(name: string, cap: ResourceCap) {
    this.caps.set(name, cap);
    if (!this.rows.has(name)) this.rows.set(name, new Map());
  }
  async tryReserve(pool: string, agentId: string, cpus: number, memBytes: number) {
    return (await this.reserve(pool, agentId, cpus, memBytes)).ok;
  }
  async reserve(
    pool: string,
    agentId: string,
    cpus: number,
    memBytes: number,
  ): Promise<ReserveResult> {
    await Promise.resolve();
    if (this.failReserve) throw this.failReserve;
    const cap = this.caps.get(pool);
    if (!cap) throw new Error(`unregistered pool ${pool}`);
    const used = this.usageOf(pool);
    if (cap.maxCpu !== undefined && Math.round((used.cpus + cpus) * 1000) > cap.maxCpu * 1000) {
      return {
        ok: false,
        pool,
        dimension: 'cpu',
        requested: cpus,
        used: used.cpus,
        max: cap.maxCpu,
        neverFits: cpus > cap.maxCpu,
      };
    }
    if (cap.maxMemoryBytes !== undefined && used.memBytes + memBytes > cap.maxMemoryBytes) {
      return {
        ok: false,
        pool,
        dimension: 'memory',
        requested: memBytes,
        used: used.memBytes,
        max: cap.maxMemoryBytes,
        neverFits: memBytes > cap.maxMemoryBytes,
      };
    }
    this.rows.get(pool)!.set(agentId, { cpus, memBytes });
    return { ok: true };
  }
  async release(pool: string, agentId: string) {
    await Promise.resolve();
    if (this.failRelease) throw this.failRelease;
    return this.rows.get(pool)?.delete(agentId) ?? false;
  }
  async reapStale() {
    return 0;
  }
  usageOf(pool: string): ResourceAmount {
    let cpus = this.foreign.get(pool)?.cpus ?? 0;
    let memBytes = this.foreign.get(pool)?.memBytes ?? 0;
    for (const row of this.rows.get(pool)?.values() ?? []) {
      cpus += row.cpus;
      memBytes += row.memBytes;
    }
    return { cpus, memBytes };
  }
  async getUsage(pool: string) {
    return this.usageOf(pool);
  }
  async list(pool: string): Promise<ReservationRow[]> {
    return [...(this.rows.get(pool) ?? new Map<string, ResourceAmount>())].map(([agentId, r]) => ({
      instanceId: 'fake',
      pid: process.pid,
      bootId: 'boot',
      agentId,
      cpus: r.cpus,
      memBytes: r.memBytes,
      reservedAt: 0,
    }));
  }
  start() {
    this.started++;
  }
  stop() {
    this.stopped++;
  }
  async releaseAllForInstance() {
    this.releasedAllForInstance++;
    for (const rows of this.rows.values()) rows.clear();
  }
  async close() {}
}
