/**
 * The shapes of kici's scaler configuration (0.1.1 and 0.9.1), as written in its YAML or
 * as its loader returns them, and of the translation report.
 */
import type { ScalerConfig, ScalerConfigInput } from '../manager/index.js';
import type { KiciResourceCap, KiciResourceRequest, KiciResourceSpec } from './resources.js';

/**
 * A kici label set (`scalers[].labelSets[]`).
 *
 * @example
 * ```ts
 * import type { KiciLabelSet } from 'scaler-primitives/kici';
 *
 * const set: KiciLabelSet = { labels: ['linux', 'x64'], resources: { cpus: 2, memory: '4g' }, image: 'ci-agent:1' };
 * ```
 */
export interface KiciLabelSet {
  /** The labels agents of this set have. */
  labels: string[];
  /** Resources (nested or flat). */
  resources?: KiciResourceRequest | KiciResourceSpec;
  /** Backend setting, kept in `options.labelSets[j]`: the container image. */
  image?: string;
  /** Backend setting: `Always`, `IfNotPresent`, `Never`. */
  imagePullPolicy?: unknown;
  /** Backend setting: the agent binary (bare metal). */
  binaryPath?: string;
  /** Backend setting: volumes to mount. */
  volumes?: string[];
  /** Backend setting: mount the container socket into the agent. */
  containerSocket?: boolean;
  /** Backend setting: environment of the agent. */
  env?: Record<string, string>;
  /** Backend setting: `pause` or `drop`. */
  backpressureMode?: unknown;
  /** Backend setting: `{ allowlist?, denyAll?, hostAccess? }` (see `addIsolationRules`). */
  networkPolicy?: unknown;
  /** Backend setting (Firecracker): root filesystem image. */
  rootfsPath?: string;
  /** Backend setting (Firecracker): kernel image. */
  kernelPath?: string;
  /** Backend setting (Firecracker): vCPUs. */
  vcpuCount?: number;
  /** Backend setting (Firecracker): memory in MiB. */
  memSizeMib?: number;
  /** Backend setting (Firecracker): overlay drive size in MiB. */
  overlayDriveSizeMib?: number;
}

/**
 * A kici warm pool (`scalers[].warmPool`).
 *
 * @example
 * ```ts
 * import type { KiciWarmPool } from 'scaler-primitives/kici';
 *
 * const warmPool: KiciWarmPool = { enabled: true, size: 1, idleTimeoutSeconds: 600 };
 * ```
 */
export interface KiciWarmPool {
  /** Whether the warm pool runs. @default false */
  enabled?: boolean;
  /** Idle agents to keep, per label set in kici. @default 0 */
  size?: number;
  /** Idle timeout. @default 300 */
  idleTimeoutSeconds?: number;
}

/**
 * A kici scaler entry (`scalers[]`).
 *
 * @example
 * ```ts
 * import type { KiciScalerEntry } from 'scaler-primitives/kici';
 *
 * const entry: KiciScalerEntry = {
 *   name: 'linux-small',
 *   type: 'container',
 *   maxAgents: 4,
 *   labelSets: [{ labels: ['linux'], resources: { cpus: 1, memory: '2g' } }],
 * };
 * ```
 */
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
  /** Concurrent `backend.spawn` calls (kici default 8); kept in `options`, reported. */
  maxConcurrentSpawns?: number;
  /** Job roles served (`builder`, `init-runner`, `all`); kept in `options`, an error unless acknowledged. */
  roles?: string[];
  /** `{ os, arch }`; kept in `options`; a non-linux/x64 platform is an error unless acknowledged. */
  platform?: {
    /** `linux`, `macos`, `windows`. */
    os?: string;
    /** `x64`, `arm64`. */
    arch?: string;
  };
  /** Isolate agents with nftables (kici default true); kept in `options`. */
  networkIsolation?: boolean;
  /** Backend setting: container engine host. */
  host?: string;
  /** Backend setting: container engine socket. */
  socketPath?: string;
  /** Backend setting: `docker`, `podman`, `auto`. */
  runtime?: string;
  /** Backend setting: the URL agents connect to. */
  orchestratorUrl?: string;
  /** Backend setting: extra `/etc/hosts` entries. */
  extraHosts?: string[];
  /** Backend setting: enforce limits with cgroups. */
  enforceCgroups?: boolean;
  /** Backend setting (Firecracker): firecracker binary. */
  firecrackerPath?: string;
  /** Backend setting (Firecracker): jailer binary. */
  jailerPath?: string;
  /** Backend setting (Firecracker): kernel image. */
  kernelPath?: string;
  /** Backend setting (Firecracker): jailer chroot base. */
  chrootBaseDir?: string;
  /** Backend setting: uid agents run as. */
  uid?: number;
  /** Backend setting: gid agents run as. */
  gid?: number;
  /** Backend setting (Firecracker): vCPUs. */
  vcpuCount?: number;
  /** Backend setting (Firecracker): memory in MiB. */
  memSizeMib?: number;
  /** Backend setting: wrap privileged commands in `sudo -n`. */
  requireSudo?: boolean;
  /** Backend setting (event scalers): workflow refs. */
  provisioningTargets?: string[];
  /** Backend setting (event scalers): claim code lifetime. */
  claimTtlSeconds?: number;
  /** Backend setting (event scalers): agent token lifetime. */
  agentTokenTtlSeconds?: number;
}

/**
 * A kici scaler config file (`version: 1`), in the 0.1.1 or 0.9.1 shape: `machinePools` as an
 * array of `{ name, cap }`, `globalResourceCap`, `warmPool.enabled`, label-set backend
 * settings such as `image`. kici's own parsed `ScalerConfig` type fits it as well.
 *
 * @example
 * ```ts
 * import { readFileSync } from 'node:fs';
 * import { type KiciScalerConfig, toScalerConfig } from 'scaler-primitives/kici';
 *
 * declare const YAML: { parse(text: string): any }; // the yaml package
 * const kici: KiciScalerConfig = YAML.parse(readFileSync('/etc/kici/scaler.yaml', 'utf8'));
 * const { ok, input, issues } = toScalerConfig(kici);
 * ```
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
  /** kici's Firecracker network settings: reported, not translated (they belong to the backend). */
  firecracker?: {
    /** Guest network. */
    cidr?: string;
    /** Bridge device. */
    bridgeName?: string;
    /** Gateway address. */
    gateway?: string;
    /** Netmask. */
    netmask?: string;
    /** nftables table. */
    table?: string;
    /** Provision the host network on start. */
    autoProvisionHost?: boolean;
  };
}

/**
 * How much a kici setting without an equivalent matters.
 *
 * @example
 * ```ts
 * import type { KiciConfigTranslation, KiciIssueSeverity } from 'scaler-primitives/kici';
 *
 * declare const result: KiciConfigTranslation; // from toScalerConfig
 * const errors = result.issues.filter((i) => i.severity === ('error' satisfies KiciIssueSeverity));
 * ```
 */
export type KiciIssueSeverity = 'error' | 'warning';

/**
 * One kici setting that has no equivalent in a `ScalerManager` config, or a schema problem.
 *
 * @example
 * ```ts
 * import { type KiciConfigIssue, type KiciScalerConfig, toScalerConfig } from 'scaler-primitives/kici';
 *
 * declare const kici: KiciScalerConfig; // kici's scaler config, as parsed from its YAML
 * for (const issue of toScalerConfig(kici).issues as KiciConfigIssue[]) {
 *   console.warn(issue.severity, issue.path.join('.'), issue.message);
 * }
 * ```
 */
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

/**
 * Options of {@link toScalerConfig}.
 *
 * @example
 * ```ts
 * import { type KiciScalerConfig, toScalerConfig, type ToScalerConfigOptions } from 'scaler-primitives/kici';
 *
 * declare const kici: KiciScalerConfig; // kici's scaler config, as parsed from its YAML
 * const options: ToScalerConfigOptions = { acknowledge: ['roles'] }; // routed by mandatoryLabels instead
 * const result = toScalerConfig(kici, options);
 * ```
 */
export interface ToScalerConfigOptions {
  /**
   * kici setting names (`'roles'`, `'platform'`, ...) whose errors you have read and
   * handled (e.g. with `mandatoryLabels` or in your backend): they are reported as warnings.
   * @default []
   */
  acknowledge?: readonly string[];
}

/**
 * The result of {@link toScalerConfig}.
 *
 * @example
 * ```ts
 * import { type BackendEntry, ScalerManager } from 'scaler-primitives/manager';
 * import { type KiciConfigTranslation, type KiciScalerConfig, toScalerConfig } from 'scaler-primitives/kici';
 * import type { PoolLedger } from 'scaler-primitives/ledger';
 *
 * declare const kici: KiciScalerConfig; // kici's scaler config, as parsed from its YAML
 * declare const backends: BackendEntry[];
 * declare const ledger: PoolLedger;
 * const result: KiciConfigTranslation = toScalerConfig(kici);
 * if (!result.ok) process.exit(1);
 * const manager = new ScalerManager({ config: result.input, backends, ledger });
 * ```
 */
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

/**
 * The result of {@link parseKiciScalerConfig}.
 *
 * @example
 * ```ts
 * import { type KiciParsedConfig, type KiciScalerConfig, parseKiciScalerConfig } from 'scaler-primitives/kici';
 *
 * declare const kici: KiciScalerConfig; // kici's scaler config, as parsed from its YAML
 * const { config, warnings }: KiciParsedConfig = parseKiciScalerConfig(kici); // throws on an error
 * for (const w of warnings) console.warn(w.path.join('.'), w.message);
 * ```
 */
export interface KiciParsedConfig {
  /** The validated `ScalerManager` config. */
  config: ScalerConfig;
  /** The warnings of the translation (settings kept for the backend, behaviour that differs). */
  warnings: KiciConfigIssue[];
}
