/**
 * What the check groups of poolLedgerConformance share: one check per key with pools and
 * instance ids of its own, closing what it opened, and the small readers every
 * group of checks uses.
 */
import type { PoolLedger } from '../../../ledger/types.js';
import type { ResourceCap } from '../../../resources/index.js';
import {
  type ConformanceCheck,
  type ConformanceRunContext,
  runSkippable,
  sample,
  skipCheck,
} from '../check.js';

export const GiB = 2 ** 30;

/** What a check body is given: pool names and ledger instances of its own. */
export interface CheckHarness {
  /** A pool name of this check and run (`n` tells several apart). */
  pool: (n?: string) => string;
  /** A new ledger instance of this check, instance id made from `n`. */
  open: (n: string) => Promise<PoolLedger>;
  /** Two new instances, `a` and `b`, each with `pool` registered with `cap`. */
  pair: (pool: string, cap: ResourceCap) => Promise<[PoolLedger, PoolLedger]>;
  /** Skip this check (it does not apply): see `ConformanceCheck.run`. Never returns. */
  skip: (reason: string) => never;
}

/** Makes one named check; `key` keeps its pools and instance ids apart from the others'. */
export type DefineCheck = (
  key: string,
  name: string,
  body: (h: CheckHarness) => Promise<void>,
) => ConformanceCheck;

/** What each group of checks is built from. */
export interface LedgerSuite {
  check: DefineCheck;
  /** The rows of a pool as `instance/agent:cpus:memBytes`, sorted. */
  rows: (ledger: PoolLedger, pool: string) => Promise<string[]>;
  /** The instance id a ledger was made with. */
  instanceOf: (ledger: PoolLedger) => string;
  /** Instances reserving at once in the contention checks. */
  instances: number;
  /** Reserves each of them makes at once. */
  perInstance: number;
  /**
   * How long a peer may take to see the rows of `owner` as stale once it is
   * closed: read before `close()` (from its `lease()` when it has one).
   */
  staleWait: (owner: PoolLedger) => number;
  /** Make one instance's lease renewals fail or work again, when the suite was given a way. */
  failRenewals: ((ledger: PoolLedger, on: boolean) => void | Promise<void>) | undefined;
}

// The instance id each ledger was made with.
const ids = new WeakMap<PoolLedger, string>();

/** The instance id a ledger of the suite was made with. */
export function instanceOf(ledger: PoolLedger): string {
  return ids.get(ledger)!;
}

/** The rows of a pool as `instance/agent:cpus:memBytes`, sorted. */
export async function rows(ledger: PoolLedger, pool: string): Promise<string[]> {
  return (await ledger.list(pool))
    .map((r) => `${r.instanceId}/${r.agentId}:${r.cpus}:${r.memBytes}`)
    .sort();
}

/**
 * The check maker of one suite. Each check gets its own pools and instance ids,
 * and closes what it opened.
 */
export function checkMaker(
  makeLedger: (args: { instanceId: string; check: string }) => PoolLedger | Promise<PoolLedger>,
  prefix: string,
): DefineCheck {
  return (key, name, body) => ({
    name,
    run: (...[context]: [ConformanceRunContext?]) =>
      runSkippable(() => runCheck(makeLedger, prefix, key, name, body, context)),
  });
}

async function runCheck(
  makeLedger: (args: { instanceId: string; check: string }) => PoolLedger | Promise<PoolLedger>,
  prefix: string,
  key: string,
  name: string,
  body: (h: CheckHarness) => Promise<void>,
  context: ConformanceRunContext | undefined,
): Promise<void> {
  const run = sample();
  const opened: PoolLedger[] = [];
  const pool = (n = 'p') => `${prefix}-${key}-${n}-${run}`;
  const open = async (n: string) => {
    const ledger = await makeLedger({
      instanceId: `${prefix}-${key}-${n}-${run}`,
      check: name,
    });
    opened.push(ledger);
    ids.set(ledger, `${prefix}-${key}-${n}-${run}`);
    return ledger;
  };
  const pair = async (p: string, cap: ResourceCap): Promise<[PoolLedger, PoolLedger]> => {
    const a = await open('a');
    const b = await open('b');
    for (const ledger of [a, b]) ledger.registerPool(p, cap);
    return [a, b];
  };
  const skip = (reason: string): never => skipCheck(context, name, reason);
  try {
    await body({ pool, open, pair, skip });
  } finally {
    for (const ledger of opened) {
      await ledger.releaseAllForInstance().catch(() => {});
      await ledger.close().catch(() => {});
    }
  }
}

/** What is added to a lease and its margin for timers and a loaded machine. */
const LEASE_SLACK_MS = 5000;

/**
 * The wait for a peer to reap a closed instance's rows: `fixed` when the suite
 * was given one; else, for a ledger with `lease()`, its lease plus its margin
 * plus some slack (the longest any lease rule lets a peer wait); else 10 s.
 */
export function staleWaitOf(fixed: number | undefined): (owner: PoolLedger) => number {
  return (owner) => {
    if (fixed !== undefined) return fixed;
    if (typeof owner.lease !== 'function') return 10_000;
    try {
      const { leaseMs, marginMs } = owner.lease();
      if (Number.isFinite(leaseMs) && Number.isFinite(marginMs)) {
        return Math.max(10_000, leaseMs + marginMs + LEASE_SLACK_MS);
      }
    } catch {
      // A lease that cannot be read: the default.
    }
    return 10_000;
  };
}
