/**
 * The additive ledger fields beyond the kici wire format: extended resources
 * on rows (`extended`) and, on the cap, `maxExtended`, `provides`, `maxAgents`.
 * Pure; shared by every ledger backend.
 *
 * What the kici ledger (`@kici-dev/orchestrator` 0.9.1, `MachineLedger`) does with
 * them, read from its published source: it parses the whole document, filters
 * and appends rows as objects, and writes the same object back, so unknown row
 * and cap fields survive its rewrites; it compares only `maxCpu` and
 * `maxMemoryBytes` of the cap; it never counts `extended` nor the number of
 * rows. Extended resources are therefore safe in a mixed pool (kici rows hold
 * none), but `maxAgents` is not: kici writers add rows without checking it.
 */
import { InvalidInputError } from '../../errors/index.js';
import type { ResourceCap } from '../../resources/types.js';

/**
 * Refuse a cap that a pool shared with kici writers cannot enforce. kici
 * (0.9.1) adds rows without counting them, so `maxAgents` would be exceeded by
 * any kici writer; extended resources are fine (kici keeps the fields and its
 * rows hold none).
 *
 * @param pool - The pool, for the message.
 * @param cap - The cap being registered.
 * @throws InvalidInputError naming the pool, the field and why.
 */
export function assertKiciCompatibleCap(pool: string, cap: ResourceCap): void {
  if (cap.maxAgents !== undefined) {
    throw new InvalidInputError(
      'pool cap',
      cap,
      `Pool ${JSON.stringify(pool)} is kici-compatible, but its cap sets maxAgents: kici writers (@kici-dev/orchestrator <= 0.9.1) add rows without counting them, so the cap could be exceeded. Remove maxAgents, or stop marking the pool kici-compatible once no kici writer shares it.`,
    );
  }
}
