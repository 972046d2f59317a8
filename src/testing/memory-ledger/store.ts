/**
 * The shared state of MemoryPoolLedger replicas: pool documents and leases,
 * one store per simulated host (or KV bucket).
 */
import { randomUUID } from 'node:crypto';
import { validatePoolName } from '../../ledger/document/pool-name.js';
import type { LedgerDocument } from '../../ledger/types.js';

// A ledger renews its lease on its clock (every leaseMs/3) while it lives and
// its renewals work; `abandon()` stops the renewals, `close()` ends the lease.
interface LeaseRecord {
  instanceId: string;
  /** The last confirmed renewal, on the ledger's clock. */
  refreshedAt: number;
  state: 'live' | 'ended' | 'abandoned';
}

/**
 * What MemoryPoolLedger reads and writes in a store: the live objects, not
 * copies. Reached through {@link storeInternals}, which the testing entry point does
 * not export, so these are no part of the store's public surface.
 */
export class StoreInternals {
  readonly #docs: Map<string, LedgerDocument>;
  readonly #leases: Map<string, LeaseRecord>;

  constructor(docs: Map<string, LedgerDocument>, leases: Map<string, LeaseRecord>) {
    this.#docs = docs;
    this.#leases = leases;
  }

  /** A pool's document itself (not a copy). */
  get(pool: string): LedgerDocument | undefined {
    return this.#docs.get(pool);
  }

  /** Store a pool's document as it is (not a copy). */
  put(pool: string, doc: LedgerDocument): void {
    this.#docs.set(pool, doc);
  }

  /** Start a ledger instance's lease, once, confirmed at `now`. */
  openLease(leaseId: string, instanceId: string, now: number): void {
    if (!this.#leases.has(leaseId)) {
      this.#leases.set(leaseId, { instanceId, refreshedAt: now, state: 'live' });
    }
  }

  /** A confirmed renewal of a live lease at `now`. */
  renewLease(leaseId: string, now: number): void {
    const lease = this.#leases.get(leaseId);
    if (lease?.state === 'live') lease.refreshedAt = now;
  }

  /**
   * End a live lease: closed (`ended`: its rows are stale at once) or left
   * behind (`abandoned`: a crash; it expires from its last renewal on).
   */
  endLease(leaseId: string, state: 'ended' | 'abandoned'): void {
    const lease = this.#leases.get(leaseId);
    if (lease && lease.state === 'live') lease.state = state;
  }

  /**
   * A peer's lease as a judge sees it at `now`: ended (or unknown to the
   * store) is expired; otherwise it is expired only when it was not renewed
   * for `windowMs` (lease + margin) while the judge itself renewed without a
   * break since `healthySince`. A judge whose own renewals fail
   * (`healthySince` undefined) judges nobody: `unknown`, rows kept.
   */
  leaseState(
    leaseId: string,
    now: number,
    windowMs: number,
    healthySince: number | undefined,
  ): 'fresh' | 'expired' | 'unknown' {
    const lease = this.#leases.get(leaseId);
    if (lease === undefined || lease.state === 'ended') return 'expired';
    if (healthySince === undefined) return 'unknown';
    return now - Math.max(lease.refreshedAt, healthySince) > windowMs ? 'expired' : 'fresh';
  }
}

const internals = new WeakMap<MemoryPoolStore, StoreInternals>();

/** The internals of a store made by its constructor. */
export function storeInternals(store: MemoryPoolStore): StoreInternals {
  const found = internals.get(store);
  if (found === undefined)
    throw new TypeError('Expected a MemoryPoolStore made by its constructor');
  return found;
}

/**
 * The shared state of {@link MemoryPoolLedger} instances: pool documents and
 * leases. One store is one "host" (or one KV bucket); give each replica its own
 * ledger over the same store.
 *
 * @example
 * ```ts
 * import { MemoryPoolLedger, MemoryPoolStore } from 'scaler-primitives/testing';
 * const store = new MemoryPoolStore();
 * const a = new MemoryPoolLedger({ instanceId: 'replica-a', store });
 * const b = new MemoryPoolLedger({ instanceId: 'replica-b', store });
 * for (const l of [a, b]) l.registerPool('host', { maxCpu: 4 });
 * await a.reserve('host', 'agent-1', 3, 0);
 * console.log((await b.reserve('host', 'agent-2', 2, 0)).ok); // false: 3 + 2 > 4
 * ```
 */
export class MemoryPoolStore {
  /** The boot id every row written through this store carries. */
  readonly bootId: string;
  readonly #docs = new Map<string, LedgerDocument>();
  readonly #leases = new Map<string, LeaseRecord>();

  /**
   * @param options - `bootId`: the boot id of the simulated host, written into every row (default a random id).
   * @throws TypeError for an unknown option or an empty `bootId`.
   */
  constructor(options: { bootId?: string } = {}) {
    for (const key of Object.keys(options ?? {})) {
      if (key !== 'bootId') {
        throw new TypeError(
          `Unknown MemoryPoolStore option \`${key}\`: the accepted option is \`bootId\``,
        );
      }
    }
    if (
      options.bootId !== undefined &&
      (typeof options.bootId !== 'string' || options.bootId === '')
    ) {
      throw new TypeError(
        `Expected \`bootId\` to be a non-empty string, got \`${String(options.bootId)}\``,
      );
    }
    this.bootId = options.bootId ?? `memory-${randomUUID()}`;
    internals.set(this, new StoreInternals(this.#docs, this.#leases));
  }

  /** The pools that have a document, sorted. */
  pools(): string[] {
    return [...this.#docs.keys()].sort();
  }

  /** A copy of a pool's document, stale rows included (`undefined` before the first write). */
  read(pool: string): LedgerDocument | undefined {
    const doc = this.#docs.get(pool);
    return doc === undefined ? undefined : structuredClone(doc);
  }

  /**
   * Replace a pool's document as another writer would (an older writer's rows,
   * a hand-edited pool). The document is copied.
   */
  write(pool: string, doc: LedgerDocument): void {
    validatePoolName(pool);
    this.#docs.set(pool, structuredClone(doc));
  }
}
