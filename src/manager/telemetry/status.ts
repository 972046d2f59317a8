import { isWarmCapacity } from '../agents/inventory.js';
import { GLOBAL_SCOPE } from '../capacity/capacity.js';
import type { FleetCore } from '../core.js';
import type { ScalerState } from '../spawning/scalers.js';
import type { ScalerEntryStatus, ScalerStatus } from '../types.js';

/** Per-scaler facts other parts add to the status (warm target, pacing, schedule). @internal */
export type StatusExtras = (scaler: ScalerState, entry: ScalerEntryStatus) => void;

/** A point-in-time summary of the fleet. @internal */
export function buildStatus(core: FleetCore, extras: StatusExtras): ScalerStatus {
  const config = core.config;
  let spawningCount = 0;
  let warmPoolCount = 0;
  for (const record of core.book.values()) {
    if (record.state === 'spawning') spawningCount++;
    if (record.scaler.config.warmPool !== undefined && isWarmCapacity(record)) warmPoolCount++;
  }
  const poolUsage = core.gate.poolUsage();
  const status: ScalerStatus = {
    globalMaxAgents: config.globalMaxAgents,
    globalActiveCount: core.book.size,
    spawningCount,
    warmPoolCount,
    globalUsage: core.gate.usage(GLOBAL_SCOPE),
    pools: Object.entries(config.machinePools).map(([name, cap]) => ({
      name,
      cap: { ...cap },
      usage: poolUsage.get(name) ?? { cpus: 0, memBytes: 0 },
    })),
    counters: { ...core.counters },
    scalers: [],
    shuttingDown: core.shuttingDown,
  };
  if (config.resourceCap !== undefined) status.globalResourceCap = { ...config.resourceCap };
  for (const scaler of core.scalers.order) {
    const counts = { spawning: 0, idle: 0, busy: 0, draining: 0, destroying: 0 };
    const draining: string[] = [];
    for (const id of scaler.agents) {
      const state = core.book.get(id)!.state;
      if (state === 'gone') continue;
      counts[state]++;
      if (state === 'draining') draining.push(id);
    }
    const entry: ScalerEntryStatus = {
      name: scaler.name,
      type: scaler.config.type,
      activeCount: scaler.agents.size,
      spawningCount: counts.spawning,
      idleCount: counts.idle,
      busyCount: counts.busy,
      drainingCount: counts.draining,
      destroyingCount: counts.destroying,
      draining,
      maxAgents: scaler.config.maxAgents,
      labelSets: scaler.labelSets.map((set) => [...set.labels]),
      usage: core.gate.usage(scaler.scope),
      mandatoryLabels: [...scaler.config.mandatoryLabels],
      retiring: scaler.retiring,
    };
    if (scaler.config.resourceCap !== undefined) {
      entry.resourceCap = { ...scaler.config.resourceCap };
    }
    if (scaler.config.machinePool !== undefined) entry.machinePool = scaler.config.machinePool;
    if (
      scaler.pools.length > 1 ||
      (scaler.pools.length === 1 && scaler.pools[0] !== scaler.config.machinePool)
    ) {
      entry.machinePools = [...scaler.pools];
    }
    extras(scaler, entry);
    status.scalers.push(entry);
  }
  return status;
}
