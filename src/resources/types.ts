/**
 * A CPU and memory declaration, as written in configuration or by a job.
 *
 * `cpus` is cores (a number, or a string such as `"1.5"` or `"500m"`);
 * `memory` is bytes (a number, or a string such as `"8Gi"` or `"2g"`).
 * An absent field means "not declared here".
 */
export interface ResourceSpec {
  /** CPU in cores: `1.5`, `"1.5"`, `"500m"`. */
  cpus?: number | string;
  /** Memory: bytes as a number, or a quantity string such as `"8Gi"` or `"512m"`. */
  memory?: number | string;
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

/** A resolved amount: cores and whole bytes. */
export interface ResourceAmount {
  /** CPU in cores, at millicore precision. */
  cpus: number;
  /** Memory in whole bytes. */
  memBytes: number;
}

/**
 * A cap on summed requests. An absent field means "no cap in that dimension".
 * This is also the `cap` object of the ledger's wire format.
 */
export interface ResourceCap {
  /** Maximum summed CPU, in cores. */
  maxCpu?: number;
  /** Maximum summed memory, in bytes. */
  maxMemoryBytes?: number;
}
