/**
 * The machine pools of an agent: which ledger serves each pool, and what part
 * of the agent's request each pool's row holds (the whole request with one
 * pool; with several, the dimensions each pool caps).
 */
import type { ConfigIssue } from '../../errors/input.js';
import type { PoolLedger } from '../../ledger/types.js';
import type { ResourceAmount, ResourceCap } from '../../resources/types.js';
import { poolsOf, type ScalerConfig } from '../config/config.js';

/** One pool of an agent and the part of its request that pool's row holds. @internal */
export interface PoolShare {
  readonly pool: string;
  readonly amount: ResourceAmount;
}

/**
 * Split `requests` over `pools` (sorted): with one pool its row holds the
 * whole request (the wire shape kici reads); with several, each row holds CPU
 * when its pool caps CPU, memory when it caps memory, and each extended
 * resource the pool caps or provides (0 for CPU and memory it does not cap).
 * @internal
 */
export function splitRequest(
  machinePools: ScalerConfig['machinePools'],
  pools: readonly string[],
  requests: ResourceAmount,
): PoolShare[] {
  if (pools.length === 1) return [{ pool: pools[0]!, amount: requests }];
  return pools.map((pool) => {
    const cap = machinePools[pool];
    const amount: ResourceAmount = {
      cpus: cap?.maxCpu === undefined ? 0 : requests.cpus,
      memBytes: cap?.maxMemoryBytes === undefined ? 0 : requests.memBytes,
    };
    let extended: Record<string, number> | undefined;
    for (const [name, count] of Object.entries(requests.extended ?? {})) {
      if (count <= 0 || cap === undefined || !covers(cap, name)) continue;
      extended ??= {};
      extended[name] = count;
    }
    if (extended !== undefined) amount.extended = extended;
    return { pool, amount };
  });
}

/** True when the cap counts `name` (caps it, lists its devices, or provides it). */
function covers(cap: ResourceCap, name: string): boolean {
  return cap.maxExtended?.[name] !== undefined || (cap.provides ?? []).includes(name);
}

/**
 * An extended resource `requests` ask for that none of several `pools`
 * counts (fail closed: it would be held nowhere), if any.
 * @internal
 */
export function uncoveredResource(
  machinePools: ScalerConfig['machinePools'],
  pools: readonly string[],
  requests: ResourceAmount,
): { resource: string; count: number } | undefined {
  if (pools.length < 2) return undefined;
  for (const [name, count] of Object.entries(requests.extended ?? {})) {
    if (count <= 0) continue;
    if (
      !pools.some((pool) => machinePools[pool] !== undefined && covers(machinePools[pool], name))
    ) {
      return { resource: name, count };
    }
  }
  return undefined;
}

/**
 * The device ids of `devices` (an agent's, by resource) that the row in `pool`
 * holds: those of the resources its share holds and its cap lists ids for.
 * @internal
 */
export function devicesIn(
  cap: ResourceCap | undefined,
  share: ResourceAmount,
  devices: Readonly<Record<string, readonly string[]>> | undefined,
): Record<string, string[]> | undefined {
  if (devices === undefined || cap?.devices === undefined) return undefined;
  let out: Record<string, string[]> | undefined;
  for (const [name, ids] of Object.entries(devices)) {
    if (cap.devices[name] === undefined || (share.extended?.[name] ?? 0) <= 0) continue;
    out ??= {};
    out[name] = [...ids];
  }
  return out;
}

/** Add a pool's granted device ids to an agent's. @internal */
export function addDevices(
  into: Record<string, string[]> | undefined,
  granted: Readonly<Record<string, readonly string[]>> | undefined,
): Record<string, string[]> | undefined {
  if (granted === undefined) return into;
  const out = into ?? {};
  for (const [name, ids] of Object.entries(granted)) out[name] = [...ids];
  return out;
}

/**
 * The ledger of each machine pool (`ledgers`, by pool name). A bad value is a TypeError.
 * @internal
 */
export class PoolLedgers {
  readonly #byPool: ReadonlyMap<string, PoolLedger> | undefined;

  constructor(ledgers: Readonly<Record<string, PoolLedger>> | undefined) {
    if (ledgers !== undefined) {
      if (typeof ledgers !== 'object' || ledgers === null || Array.isArray(ledgers)) {
        throw new TypeError(
          `Expected \`ledgers\` to be an object of pool name to PoolLedger, got \`${Array.isArray(ledgers) ? 'array' : String(ledgers)}\``,
        );
      }
      const map = new Map<string, PoolLedger>();
      for (const [pool, each] of Object.entries(ledgers)) {
        checkLedger(`ledgers[${JSON.stringify(pool.slice(0, 64))}]`, each);
        map.set(pool, each);
      }
      this.#byPool = map;
    }
  }

  /** True when any ledger was given. */
  get any(): boolean {
    return (this.#byPool?.size ?? 0) > 0;
  }

  /** The ledger of `pool`, if one was given. */
  of(pool: string): PoolLedger | undefined {
    return this.#byPool?.get(pool);
  }

  /** Every distinct ledger object. */
  all(): PoolLedger[] {
    return [...new Set(this.#byPool?.values() ?? [])];
  }

  /** The pools (of `pools`) a ledger serves, by ledger. */
  byLedger(pools: Iterable<string>): Map<PoolLedger, string[]> {
    const out = new Map<PoolLedger, string[]>();
    for (const pool of pools) {
      const ledger = this.of(pool);
      if (ledger === undefined) continue;
      const list = out.get(ledger) ?? [];
      list.push(pool);
      out.set(ledger, list);
    }
    return out;
  }

  /** Pools a config uses or declares that no ledger serves. */
  check(config: ScalerConfig): ConfigIssue[] {
    const errors: ConfigIssue[] = [];
    if (this.#byPool !== undefined) {
      for (const pool of Object.keys(config.machinePools)) {
        if (!this.#byPool.has(pool)) {
          errors.push({
            path: ['machinePools', pool],
            message: `Machine pool "${pool}" has no ledger: add it to the \`ledgers\` option (given for: ${[...this.#byPool.keys()].join(', ') || 'none'})`,
          });
        }
      }
      return errors;
    }
    for (const [i, scaler] of config.scalers.entries()) {
      const named = new Set(poolsOf(scaler, undefined));
      if (named.size > 0) {
        errors.push({
          path: ['scalers', i, scaler.machinePools === undefined ? 'machinePool' : 'machinePools'],
          message: `Scaler "${scaler.name}" uses machine pool ${[...named].map((p) => `"${p}"`).join(', ')} but the manager was given no \`ledgers\``,
        });
      }
      for (const [j, set] of scaler.labelSets.entries()) {
        if (set.machinePool === undefined && set.machinePools === undefined) continue;
        errors.push({
          path: [
            'scalers',
            i,
            'labelSets',
            j,
            set.machinePools === undefined ? 'machinePool' : 'machinePools',
          ],
          message: `Label set ${j} of scaler "${scaler.name}" uses machine pool ${poolsOf(
            scaler,
            set,
          )
            .map((p) => `"${p}"`)
            .join(', ')} but the manager was given no \`ledgers\``,
        });
      }
    }
    return errors;
  }
}

function checkLedger(name: string, ledger: unknown): void {
  const l = ledger as Partial<PoolLedger> | null;
  if (
    typeof l !== 'object' ||
    l === null ||
    typeof l.reserve !== 'function' ||
    typeof l.release !== 'function' ||
    typeof l.registerPool !== 'function'
  ) {
    throw new TypeError(
      `Expected \`${name}\` to be a PoolLedger (registerPool, reserve, release, ...), got \`${l === null ? 'null' : typeof l}\``,
    );
  }
}
