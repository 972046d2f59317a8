/**
 * A CPU, memory and extended-resource declaration, as written in configuration
 * or by a job.
 *
 * `cpus` is cores (a number, or a string such as `"1.5"` or `"500m"`);
 * `memory` is bytes (a number, or a string such as `"8Gi"` or `"2g"`); any
 * domain-prefixed key (`"nvidia.com/gpu"`) is an extended resource, a whole
 * count. An absent field means "not declared here"; any other key is refused.
 */
export interface ResourceSpec {
  /** CPU in cores: `1.5`, `"1.5"`, `"500m"`. */
  cpus?: number | string;
  /** Memory: bytes as a number, or a quantity string such as `"8Gi"` or `"512m"`. */
  memory?: number | string;
  /**
   * Extended resources by name (`"nvidia.com/gpu": 1`): whole counts. The key
   * type is `ExtendedResourceName` written out: the declaration bundler
   * drops the import of a type used only as an index-signature key.
   */
  [extended: `${string}/${string}`]: number | string | undefined;
}

/**
 * A job's (or a layer's) resource declaration: what it needs (`requests`, what
 * caps add up) and what it may use at most (`limits`, what backends enforce).
 */
export interface ResourceRequest {
  /** What the job needs; summed by caps. */
  requests?: ResourceSpec;
  /** What the job may use at most; enforced by the backend. */
  limits?: ResourceSpec;
}

/** A resolved amount: cores, whole bytes, and whole counts of extended resources. */
export interface ResourceAmount {
  /** CPU in cores, at millicore precision. */
  cpus: number;
  /** Memory in whole bytes. */
  memBytes: number;
  /**
   * Extended resources by name, whole counts (`{ "nvidia.com/gpu": 1 }`).
   * Absent when none is declared.
   */
  extended?: Readonly<Record<string, number>>;
}

/**
 * The largest CPU limit `resolveResources` resolves, in cores: 214748.36, the
 * largest `CPUQuota=` systemd accepts (it reads INT_MAX hundredths of a percent).
 * A limit is what a backend enforces on one agent, so every resolved limit can be
 * written as a cap (`capsFromResources` never refuses one); no machine has more
 * cores. Requests and pool caps keep the whole `MAX_CPU_CORES` range.
 */
export const MAX_CPU_LIMIT_CORES = Math.floor(2_147_483_647 / 100) / 100;

/**
 * A resolved limit: what a backend enforces on one agent. Unlike a request
 * (where "not declared" is a request of nothing, 0), a limit that no layer
 * declares is **unset**: the field is absent, and every module reads that the
 * same way: no cap is written for it (`capsFromResources` leaves the systemd
 * field out, so the host's own setting applies), a backend enforces none, and
 * a limit range's `max` refuses it. A limit, when present, is positive.
 */
export interface ResourceLimits {
  /** CPU in cores, at millicore precision; absent when unset. */
  cpus?: number;
  /** Memory in whole bytes; absent when unset. */
  memBytes?: number;
  /**
   * Extended resources by name, whole counts, equal to their requests.
   * Absent when none is declared.
   */
  extended?: Readonly<Record<string, number>>;
}

/**
 * A cap on summed requests. An absent field means "no cap in that dimension".
 * This is also the `cap` object of the ledger's wire format.
 *
 * Extended resources fail closed: a cap that neither caps a resource in
 * `maxExtended` nor lists it in `provides` allows none of it (a machine that
 * does not declare GPUs has none). A scope with no cap at all limits nothing.
 */
export interface ResourceCap {
  /** Maximum summed CPU, in cores. */
  maxCpu?: number;
  /** Maximum summed memory, in bytes. */
  maxMemoryBytes?: number;
  /** Maximum summed count per extended resource (`{ "nvidia.com/gpu": 4 }`). */
  maxExtended?: Readonly<Record<string, number>>;
  /** Extended resources provided without a limit (`["example.com/scratch"]`). */
  provides?: readonly string[];
  /** Maximum number of reservations (agents) held at once. */
  maxAgents?: number;
  /**
   * The ids of an extended resource's devices, by resource name
   * (`{ "nvidia.com/gpu": ["0", "1", "2", "3"] }`). Only machine pool ledgers
   * use it: a grant of `n` of the resource then also assigns `n` of these ids
   * (the lowest free ones, in this order) and stores them in the row. The
   * resource's `maxExtended` count is the number of ids (given or filled in).
   * Cap math (`CapTracker`) counts the resource and ignores the ids.
   */
  devices?: Readonly<Record<string, readonly string[]>>;
}
