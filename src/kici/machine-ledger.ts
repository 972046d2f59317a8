/**
 * kici's `MachineLedger` surface over this library's `MachineLedger`.
 */

import { normalizeCap } from '../ledger/document/cap.js';
import { validatePoolName } from '../ledger/document/pool-name.js';
import {
  MachineLedger as CoreMachineLedger,
  type MachineLedgerOptions as CoreMachineLedgerOptions,
} from '../ledger/index.js';
import type { ResourceAmount, ResourceCap } from '../resources/index.js';
import { type KiciEnv, resolveKiciLedgerDir } from './ledger-dir.js';

// kici's reaper period.
const DEFAULT_REAP_INTERVAL_MS = 30_000;

/**
 * A drop-in for kici's `MachineLedger` (`@kici-dev/orchestrator` `src/scaler/machine-ledger.ts`):
 * the same constructor, methods and return types, the same directory, file format and lock,
 * so a kici orchestrator and one using this adapter share a pool on one host. Every
 * operation is done by this library's `MachineLedger` (`scaler-primitives/ledger`).
 *
 * Kept from kici: the directory chain, `release` removes only this instance's row, an
 * operation on a pool that was not registered throws, `releaseAllForInstance` never throws.
 *
 * Changed, because kici's behaviour is unsafe (see docs/migrating-from-kici.md):
 * a corrupt or cap-mismatched file is an error and is never overwritten; rows of a peer
 * killed with SIGKILL are reaped once its lease expires (kici keeps them until reboot);
 * a second live reservation for the same agent is refused; amounts are validated; a stuck
 * lock is taken over only when its holder stopped refreshing it.
 *
 * @example
 * ```ts
 * import { MachineLedger } from 'scaler-primitives/kici';
 *
 * const ledger = new MachineLedger({ instanceId: 'orchestrator-a' });
 * ledger.registerPool('build-host', { maxCpu: 16, maxMemoryBytes: 64 * 2 ** 30 });
 * ledger.start();
 * if (await ledger.tryReserve('build-host', 'agent-1', 2, 4 * 2 ** 30)) {
 *   // ... the agent ran ...
 *   await ledger.release('build-host', 'agent-1');
 * }
 * await ledger.releaseAllForInstance();
 * ledger.stop();
 * ```
 */
export class MachineLedger {
  /** This instance's id. */
  readonly instanceId: string;

  readonly #explicitDir: string | undefined;
  readonly #env: KiciEnv | undefined;
  readonly #coreOptions: ConstructorParameters<typeof MachineLedger>[0]['core'];
  readonly #caps = new Map<string, ResourceCap>();
  #core: CoreMachineLedger | undefined;
  #pending: Promise<CoreMachineLedger> | undefined;
  #reapIntervalMs: number | undefined;

  /**
   * @param opts - kici's `{ explicitDir?, instanceId }`, plus optional `env` and `core` (options of the core ledger).
   * @throws TypeError when `instanceId` is not a non-empty string or `explicitDir` not a string.
   */
  constructor(opts: {
    /**
     * The ledger directory. When absent (or empty) the directory is resolved as kici does,
     * see {@link resolveKiciLedgerDir}. kici's orchestrator fills it from
     * `KICI_MACHINE_LEDGER_DIR` (see {@link kiciLedgerDirFromEnv}); the ledger itself does not.
     */
    explicitDir?: string;
    /** This orchestrator instance's id, written into every row it makes. */
    instanceId: string;
    /** The environment for `XDG_STATE_HOME` and `HOME`. @default `process.env` */
    env?: Readonly<Record<string, string | undefined>>;
    /**
     * Options for the underlying `scaler-primitives/ledger` `MachineLedger` (lease, lock and
     * clock timings, `fsync`, ...). `instanceId` and the directory come from above.
     */
    core?: Omit<CoreMachineLedgerOptions, 'instanceId' | 'dir' | 'explicitDir' | 'env'>;
  }) {
    if (typeof opts?.instanceId !== 'string' || opts.instanceId === '') {
      throw new TypeError(
        `Expected \`instanceId\` to be a non-empty string, got \`${String(opts?.instanceId)}\``,
      );
    }
    if (opts.explicitDir !== undefined && typeof opts.explicitDir !== 'string') {
      throw new TypeError(
        `Expected \`explicitDir\` to be a string, got \`${typeof opts.explicitDir}\``,
      );
    }
    this.instanceId = opts.instanceId;
    this.#explicitDir = opts.explicitDir;
    this.#env = opts.env;
    this.#coreOptions = opts.core;
  }

  /**
   * The underlying `scaler-primitives/ledger` `MachineLedger`, created once the directory is
   * resolved: use it for what kici's class lacks (`reserve` with the refusal reason, `list`,
   * `inspect`, `close`).
   *
   * @throws LedgerDirError when no directory is usable (retried on the next call).
   */
  ledger(): Promise<CoreMachineLedger> {
    if (this.#core) return Promise.resolve(this.#core);
    if (!this.#pending) {
      const pending = resolveKiciLedgerDir(this.#explicitDir, this.#env).then((dir) => {
        const core = new CoreMachineLedger({
          ...this.#coreOptions,
          instanceId: this.instanceId,
          dir,
        });
        for (const [name, cap] of this.#caps) core.registerPool(name, cap);
        if (this.#reapIntervalMs !== undefined) core.start(this.#reapIntervalMs);
        this.#core = core;
        return core;
      });
      this.#pending = pending;
      // A failed resolution is retried on the next call, as kici does.
      pending.catch(() => {
        if (this.#pending === pending) this.#pending = undefined;
      });
    }
    return this.#pending;
  }

  /** The resolved ledger directory. @throws LedgerDirError as {@link MachineLedger.ledger}. */
  async dir(): Promise<string> {
    return (await this.ledger()).dir();
  }

  /**
   * Register the cap a pool must have; the file's cap must match it.
   *
   * @throws InvalidInputError for an invalid pool name (kici accepts any string and uses it
   *   as a file name).
   * @throws TypeError for a cap field that is not a finite number >= 0.
   */
  registerPool(name: string, cap: ResourceCap): void {
    const pool = validatePoolName(name);
    const normalized = normalizeCap(cap);
    this.#caps.set(pool, normalized);
    this.#core?.registerPool(pool, normalized);
  }

  /**
   * Reserve `cpus` cores and `memBytes` bytes for `agentId` in `pool`; true when granted.
   * Stale rows are left out of the sum first.
   *
   * @throws TypeError when the pool is not registered or an amount is not a finite number >= 0.
   * @throws DuplicateReservationError when the pool already holds a live row for `agentId`.
   * @throws LedgerCorruptError, LedgerCapMismatchError, LedgerBusyError, LedgerDirError,
   *   LedgerLeaseExpiredError as `scaler-primitives/ledger` `MachineLedger.reserve`.
   */
  async tryReserve(
    poolName: string,
    agentId: string,
    cpus: number,
    memBytes: number,
  ): Promise<boolean> {
    this.#registered(poolName);
    return (await this.ledger()).tryReserve(poolName, agentId, cpus, memBytes);
  }

  /**
   * Remove this instance's reservation for `agentId` in `pool`. Idempotent. A row of the
   * same agent id made by another instance is left alone, as in kici.
   *
   * @throws TypeError when the pool is not registered; ledger errors as {@link MachineLedger.tryReserve}.
   */
  async release(poolName: string, agentId: string): Promise<void> {
    this.#registered(poolName);
    await (await this.ledger()).release(poolName, agentId, { instanceId: this.instanceId });
  }

  /**
   * Remove the stale rows of `pool` now.
   *
   * @throws TypeError when the pool is not registered; ledger errors as {@link MachineLedger.tryReserve}.
   */
  async reapStale(poolName: string): Promise<void> {
    this.#registered(poolName);
    await (await this.ledger()).reapStale(poolName);
  }

  /**
   * Summed cores and bytes of the live rows of `pool` (takes no lock, writes nothing).
   *
   * @throws TypeError when the pool is not registered; LedgerCorruptError for a bad file.
   */
  async getUsage(poolName: string): Promise<{
    /** Summed cores of the live rows. */
    cpus: number;
    /** Summed bytes of the live rows. */
    memBytes: number;
  }> {
    this.#registered(poolName);
    const usage: ResourceAmount = await (await this.ledger()).getUsage(poolName);
    return { cpus: usage.cpus, memBytes: usage.memBytes };
  }

  /**
   * Start reaping every registered pool every `intervalMs` (unref'd timer). Idempotent.
   * A failed round never throws; it is retried on the next tick.
   *
   * @param intervalMs - The period. @default 30000
   * @throws TypeError when `intervalMs` is not a finite number > 0.
   */
  start(intervalMs: number = DEFAULT_REAP_INTERVAL_MS): void {
    if (typeof intervalMs !== 'number' || !Number.isFinite(intervalMs) || intervalMs <= 0) {
      throw new TypeError(
        `Expected \`intervalMs\` to be a finite number > 0, got \`${String(intervalMs)}\``,
      );
    }
    if (this.#reapIntervalMs !== undefined) return;
    this.#reapIntervalMs = intervalMs;
    if (this.#core) {
      this.#core.start(intervalMs);
      return;
    }
    // The reaper starts once the directory is resolved (here, or by the next operation).
    this.ledger().catch(() => {});
  }

  /** Stop the reaper started by {@link MachineLedger.start}. */
  stop(): void {
    this.#reapIntervalMs = undefined;
    this.#core?.stop();
  }

  /** Release every row this instance holds in every registered pool. Best effort: never throws. */
  async releaseAllForInstance(): Promise<void> {
    if (this.#caps.size === 0) return;
    try {
      await (await this.ledger()).releaseAllForInstance();
    } catch {
      // kici's contract: best effort on shutdown.
    }
  }

  /**
   * Not in kici: stop the timers and end this instance's lease, so peers reap rows it left
   * behind. Call after {@link MachineLedger.releaseAllForInstance} on shutdown.
   */
  async close(): Promise<void> {
    this.#reapIntervalMs = undefined;
    const core = this.#core ?? (await this.#pending?.catch(() => undefined));
    await core?.close();
  }

  #registered(pool: string): void {
    if (!this.#caps.has(pool)) {
      throw new TypeError(
        `Pool ${JSON.stringify(pool)} is not registered; call registerPool(${JSON.stringify(pool)}, cap) first`,
      );
    }
  }
}
