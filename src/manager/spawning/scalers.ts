import type { ConfigIssue } from '../../errors/input.js';
import type { ResourceRequest } from '../../resources/types.js';
import type { ScalerBackend } from '../backend.js';
import type { PoolLedgers } from '../capacity/pools.js';
import {
  byCodeUnits,
  poolsOf,
  type ScalerConfig,
  type ScalerEntryConfig,
} from '../config/config.js';
import type { NoMatchReason } from '../types.js';
import { automaticLabels, type CompiledLabelSet, explainMatch } from './labels.js';

/** One backend the host provides, under the scaler name it serves. */
export interface BackendEntry {
  /** The scaler name in config (`scalers[].name`). */
  name: string;
  /** The host's implementation. */
  backend: ScalerBackend;
  /**
   * Platform labels the manager adds to every label set of this scaler (e.g.
   * `scaler-primitives:os:linux`, `scaler-primitives:arch:amd64`). Each must start with the config's
   * `autoLabelPrefix`.
   */
  platformLabels?: string[];
}

/** @internal */
export interface LabelSetState extends CompiledLabelSet {
  resources: ResourceRequest | undefined;
  /** The machine pools its agents reserve in (its own, else the scaler's), sorted. */
  pools: readonly string[];
}

/** One scaler's live state. @internal */
export interface ScalerState {
  readonly name: string;
  /** The CapTracker scope of this scaler. */
  readonly scope: string;
  config: ScalerEntryConfig;
  readonly backend: ScalerBackend;
  labelSets: LabelSetState[];
  readonly agents: Set<string>;
  /** Every pool its agents may reserve in (its own and its label sets'), sorted. */
  pools: readonly string[];
  retiring: boolean;
  jobSpawnsInFlight: number;
  lastDemandAt: number;
}

/** @internal */
export interface Candidate {
  scaler: ScalerState;
  labelSet: LabelSetState;
}

/** @internal */
export interface MatchOutcome {
  candidates: Candidate[];
  reasons: NoMatchReason[];
}

const MATCH_CACHE_LIMIT = 4096;

/**
 * The scalers: built from config and the host's backends, matched against a
 * job's labels (cached), retired when a reload removes them and their last agent goes.
 * @internal
 */
export class ScalerRegistry {
  readonly #backends = new Map<string, BackendEntry>();
  readonly #scalers = new Map<string, ScalerState>();
  /** Scalers in config order (retiring ones last), for matching. */
  #order: ScalerState[] = [];
  readonly #matchCache = new Map<string, MatchOutcome>();
  readonly #onRetire: (state: ScalerState) => void;

  constructor(backends: readonly BackendEntry[], onRetire: (state: ScalerState) => void) {
    if (!Array.isArray(backends)) {
      throw new TypeError(
        `Expected \`backends\` to be an array of { name, backend }, got \`${typeof backends}\``,
      );
    }
    for (const entry of backends) {
      if (typeof entry?.name !== 'string' || typeof entry.backend?.spawn !== 'function') {
        throw new TypeError(
          `Expected each backend entry to be { name: string, backend: { spawn, destroy } }, got \`${String(entry?.name)}\``,
        );
      }
      if (this.#backends.has(entry.name)) {
        throw new TypeError(`Expected backend names to be unique, got \`${entry.name}\` twice`);
      }
      this.#backends.set(entry.name, entry);
    }
    this.#onRetire = onRetire;
  }

  /** Scalers in matching order (retiring ones last). */
  get order(): readonly ScalerState[] {
    return this.#order;
  }

  get(name: string): ScalerState | undefined {
    return this.#scalers.get(name);
  }

  values(): IterableIterator<ScalerState> {
    return this.#scalers.values();
  }

  /** Problems a valid config still has against this manager's backends and ledgers. */
  check(config: ScalerConfig, ledgers: PoolLedgers): ConfigIssue[] {
    const errors: ConfigIssue[] = [];
    for (const [i, scaler] of config.scalers.entries()) {
      const entry = this.#backends.get(scaler.name);
      if (entry === undefined) {
        errors.push({
          path: ['scalers', i, 'name'],
          message: `No backend was given for scaler "${scaler.name}" (backends: ${[...this.#backends.keys()].join(', ') || 'none'})`,
        });
        continue;
      }
      for (const label of entry.platformLabels ?? []) {
        if (!label.startsWith(config.autoLabelPrefix)) {
          errors.push({
            path: ['scalers', i, 'name'],
            message: `Platform label "${label}" of scaler "${scaler.name}" must start with the automatic-label prefix "${config.autoLabelPrefix}"`,
          });
        }
      }
    }
    errors.push(...ledgers.check(config));
    return errors;
  }

  /** Apply a checked config; returns the scalers it retires or keeps retiring. */
  apply(config: ScalerConfig): void {
    this.#matchCache.clear();
    const keep = new Set<string>();
    const order: ScalerState[] = [];
    for (const entry of config.scalers) {
      keep.add(entry.name);
      const backend = this.#backends.get(entry.name)!;
      const auto = automaticLabels(
        config.autoLabelPrefix,
        entry.name,
        backend.platformLabels ?? [],
      );
      const labelSets: LabelSetState[] = entry.labelSets.map((set, index) => {
        const labels = [...new Set([...set.labels, ...auto])];
        const pools = poolsOf(entry, set);
        return { index, labels, set: new Set(labels), resources: set.resources, pools };
      });
      let state = this.#scalers.get(entry.name);
      if (state === undefined) {
        state = {
          name: entry.name,
          scope: `scaler:${entry.name}`,
          config: entry,
          backend: backend.backend,
          labelSets,
          agents: new Set(),
          pools: allPools(labelSets),
          retiring: false,
          jobSpawnsInFlight: 0,
          lastDemandAt: Number.NEGATIVE_INFINITY,
        };
        this.#scalers.set(entry.name, state);
      } else {
        state.config = entry;
        state.labelSets = labelSets;
        state.pools = allPools(labelSets);
        state.retiring = false;
      }
      order.push(state);
    }
    for (const state of this.#scalers.values()) {
      if (keep.has(state.name)) continue;
      state.retiring = true;
      if (state.agents.size > 0) order.push(state);
    }
    this.#order = order;
    for (const state of [...this.#scalers.values()]) this.retireIfDone(state);
  }

  /** Remove a retiring scaler once its last agent is gone. */
  retireIfDone(state: ScalerState): void {
    if (!state.retiring || state.agents.size > 0) return;
    if (this.#scalers.get(state.name) !== state) return;
    this.#scalers.delete(state.name);
    this.#order = this.#order.filter((s) => s !== state);
    this.#matchCache.clear();
    this.#onRetire(state);
  }

  /** The scalers (and their first fitting label set) that can run a job, in order. */
  match(labels: readonly string[], exclude: readonly string[]): MatchOutcome {
    const key = matchKey(labels, exclude);
    const cached = this.#matchCache.get(key);
    if (cached) return cached;
    const jobSet = new Set(labels);
    const candidates: Candidate[] = [];
    const reasons: NoMatchReason[] = [];
    for (const scaler of this.#order) {
      if (scaler.retiring) {
        reasons.push({ scaler: scaler.name, reason: 'retired' });
        continue;
      }
      const found = explainMatch(
        scaler.name,
        scaler.labelSets,
        scaler.config.mandatoryLabels,
        labels,
        jobSet,
        exclude,
      );
      if ('reason' in found) reasons.push(found);
      else candidates.push({ scaler, labelSet: found as LabelSetState });
    }
    const outcome = { candidates, reasons };
    if (this.#matchCache.size >= MATCH_CACHE_LIMIT) this.#matchCache.clear();
    this.#matchCache.set(key, outcome);
    return outcome;
  }
}

// Each label length-prefixed keeps ['a,b'] and ['a', 'b'] apart (job labels
// are not restricted), as JSON would, at a fraction of the cost.
function matchKey(labels: readonly string[], exclude: readonly string[]): string {
  let key = `${labels.length}`;
  for (const label of labels) key += `:${label.length}:${label}`;
  key += `|${exclude.length}`;
  for (const label of exclude) key += `:${label.length}:${label}`;
  return key;
}

function allPools(labelSets: readonly LabelSetState[]): string[] {
  return [...new Set(labelSets.flatMap((set) => set.pools))].sort(byCodeUnits);
}
