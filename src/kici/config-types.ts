/**
 * The shapes of kici's scaler configuration (0.1.1 and 0.9.1), as written in its YAML or
 * as its loader returns them, and of the translation report.
 */
import type { ScalerConfig, ScalerConfigInput } from '../manager/index.js';
import type { KiciResourceCap, KiciResourceRequest, KiciResourceSpec } from './resources.js';

/** A kici label set (`scalers[].labelSets[]`). */
export interface KiciLabelSet {
  /** The labels agents of this set have. */
  labels: string[];
  /** Resources (nested or flat). */
  resources?: KiciResourceRequest | KiciResourceSpec;
  /** Backend settings of the set (`image`, `imagePullPolicy`, `networkPolicy`, `volumes`, ...). */
  [backendSetting: string]: unknown;
}

/** A kici warm pool (`scalers[].warmPool`). */
export interface KiciWarmPool {
  /** Whether the warm pool runs. @default false */
  enabled?: boolean;
  /** Idle agents to keep, per label set in kici. @default 0 */
  size?: number;
  /** Idle timeout. @default 300 */
  idleTimeoutSeconds?: number;
}

/** A kici scaler entry (`scalers[]`). */
export interface KiciScalerEntry {
  /** Unique name. */
  name: string;
  /** `container`, `firecracker`, `bare-metal`, `event`. */
  type: string;
  /** The most agents at once. */
  maxAgents: number;
  /** The label sets. */
  labelSets: KiciLabelSet[];
  /** Labels a job must name to run here. */
  mandatoryLabels?: string[];
  /** The machine pool. */
  machinePool?: string;
  /** The scaler's cap. */
  resourceCap?: KiciResourceCap;
  /** The warm pool. */
  warmPool?: KiciWarmPool;
  /** Backend and routing settings (`maxConcurrentSpawns`, `roles`, `platform`, `host`, ...). */
  [setting: string]: unknown;
}

/**
 * A kici scaler config file (`version: 1`), in the 0.1.1 or 0.9.1 shape: `machinePools` as an
 * array of `{ name, cap }`, `globalResourceCap`, `warmPool.enabled`, label-set backend
 * settings such as `image`. kici's own parsed `ScalerConfig` type fits it as well.
 */
export interface KiciScalerConfig {
  /** Always 1. */
  version?: number;
  /** The most agents the orchestrator runs at once. @default 50 (kici's default) */
  globalMaxAgents?: number;
  /** Default resources. */
  defaults?: {
    /** Resources for label sets that declare none. */
    resources?: KiciResourceRequest | KiciResourceSpec;
  };
  /** The orchestrator-wide cap. */
  globalResourceCap?: KiciResourceCap;
  /** Named machine pools shared across orchestrators on one host. */
  machinePools?: Array<{
    /** The pool name. */
    name: string;
    /** The pool's cap. */
    cap: KiciResourceCap;
  }>;
  /** The scalers. */
  scalers: KiciScalerEntry[];
  /** Other top-level settings (`firecracker` network settings, ...). */
  [setting: string]: unknown;
}

/** How much a kici setting without an equivalent matters. */
export type KiciIssueSeverity = 'error' | 'warning';

/** One kici setting that has no equivalent in a `ScalerManager` config, or a schema problem. */
export interface KiciConfigIssue {
  /** Path in the kici config, e.g. `['scalers', 0, 'roles']`. */
  path: ReadonlyArray<string | number>;
  /**
   * `error`: dropping or moving it changes what is allowed to run (routing, isolation,
   * caps), or the config is invalid. `warning`: behaviour differs in a way that does not
   * loosen a guarantee (pacing, warm-pool size, settings kept for the backend).
   */
  severity: KiciIssueSeverity;
  /** What differs and what to do. */
  message: string;
}

/** Options of {@link toScalerConfig}. */
export interface ToScalerConfigOptions {
  /**
   * kici setting names (`'roles'`, `'platform'`, ...) whose errors you have read and
   * handled (e.g. with `mandatoryLabels` or in your backend): they are reported as warnings.
   * @default []
   */
  acknowledge?: readonly string[];
}

/** The result of {@link toScalerConfig}. */
export interface KiciConfigTranslation {
  /** True when there is no error: `config` is set. */
  ok: boolean;
  /** The validated config (set when `ok`). */
  config?: ScalerConfig;
  /** The translated config as written, before validation (always set; inspect or edit it). */
  input: ScalerConfigInput;
  /** Every setting without an equivalent and every schema problem, errors first. */
  issues: KiciConfigIssue[];
}
