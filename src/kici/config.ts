/**
 * kici's scaler config (0.1.1 and 0.9.1 shapes, as its YAML parses or as its loader returns
 * it) -> a `ScalerManager` config, with a report of every setting that has no equivalent.
 */
import { ConfigError } from '../errors/index.js';
import {
  formatConfigPath,
  type ScalerConfig,
  type ScalerConfigInput,
  validateScalerConfig,
} from '../manager/index.js';
import { fromKiciCap, fromKiciResources } from './resources.js';

type ScalerEntryInput = ScalerConfigInput['scalers'][number];
type LabelSetInput = ScalerEntryInput['labelSets'][number];

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
    /** Resources for label sets that declare none: nested `{ requests?, limits? }` or flat. */
    resources?:
      | {
          /** What the job needs; summed by caps. */
          requests?: {
            /** Cores. */
            cpus?: number;
            /** `"<number><k|m|g>"` (1024-based, case-insensitive, blanks allowed before the unit), or bytes. */
            memory?: string | number;
          };
          /** What the job may use at most. */
          limits?: {
            /** Cores. */
            cpus?: number;
            /** `"<number><k|m|g>"` (1024-based, case-insensitive, blanks allowed before the unit), or bytes. */
            memory?: string | number;
          };
        }
      | {
          /** Cores. */
          cpus?: number;
          /** `"<number><k|m|g>"` (1024-based, case-insensitive, blanks allowed before the unit), or bytes. */
          memory?: string | number;
        };
  };
  /**
   * The orchestrator-wide cap, as written in kici's YAML (`maxMemory: "64g"`) or as its
   * loader returns it (`maxMemoryBytes`).
   */
  globalResourceCap?: {
    /** Maximum summed cores. */
    maxCpu?: number;
    /** Maximum summed memory as a kici memory string (`"64g"`, as written in its YAML). */
    maxMemory?: string;
    /** Maximum summed memory in bytes (kici's parsed form). */
    maxMemoryBytes?: number;
  };
  /** Named machine pools shared across orchestrators on one host. */
  machinePools?: Array<{
    /** The pool name. */
    name: string;
    /** The pool's cap (as `globalResourceCap`). */
    cap: NonNullable<KiciScalerConfig['globalResourceCap']>;
  }>;
  /** The scalers (`scalers[]`). */
  scalers: Array<{
    /** Unique name. */
    name: string;
    /** `container`, `firecracker`, `bare-metal`, `event`. */
    type: string;
    /** The most agents at once. */
    maxAgents: number;
    /** The label sets (`scalers[].labelSets[]`). */
    labelSets: Array<{
      /** The labels agents of this set have. */
      labels: string[];
      /** Resources (nested `{ requests?, limits? }` or flat `{ cpus?, memory? }`), as `defaults.resources`. */
      resources?: NonNullable<KiciScalerConfig['defaults']>['resources'];
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
    }>;
    /** Labels a job must name to run here. */
    mandatoryLabels?: string[];
    /** The machine pool. */
    machinePool?: string;
    /** The scaler's cap (as `globalResourceCap`). */
    resourceCap?: KiciScalerConfig['globalResourceCap'];
    /** The warm pool (`scalers[].warmPool`). */
    warmPool?: {
      /** Whether the warm pool runs. @default false */
      enabled?: boolean;
      /** Idle agents to keep, per label set in kici. @default 0 */
      size?: number;
      /** Idle timeout. @default 300 */
      idleTimeoutSeconds?: number;
    };
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
  }>;
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
 * kici's automatic-label prefix, which `toScalerConfig` sets (the core's default is `scaler-primitives:`).
 */
export const KICI_AUTO_LABEL_PREFIX = 'kici:';

/** kici's `globalMaxAgents` default. */
const KICI_GLOBAL_MAX_AGENTS = 50;

/**
 * Translate a kici scaler config (0.1.1 or 0.9.1 shape, as written or as kici's loader
 * returns it) into a `ScalerManager` config, validated with `scalerConfigSchema`, and report
 * every kici setting that has no equivalent.
 *
 * - `version` must be 1; `globalMaxAgents` defaults to kici's 50.
 * - `globalResourceCap` becomes `resourceCap`; `machinePools: [{ name, cap }]` becomes
 *   `machinePools: { [name]: cap }`; memory strings use kici's grammar ({@link parseKiciMemory}).
 * - `warmPool.enabled: false` (or absent) means no warm pool.
 * - Backend settings (`image`, `host`, `runtime`, `networkPolicy`, `vcpuCount`, ...) are
 *   kept in the scaler's `options` (label-set ones in `options.labelSets[j]`), which
 *   `getAgent(id).context` hands to the backend; `networkIsolation` is made explicit
 *   (kici's default `true`).
 * - Settings that would widen what runs where (`roles`, a non-linux/x64 `platform`) are
 *   errors until acknowledged; unknown settings (which kici drops silently) are errors.
 *
 * @param kici - The kici config (e.g. `YAML.parse` of its scaler file).
 * @param options - `acknowledge`: kici settings whose error you accept (`roles`, `platform`).
 * @returns The translation, the validated config when there is no error, and every issue.
 *
 * @example
 * ```ts
 * import { readFileSync } from 'node:fs';
 * import { type BackendEntry, ScalerManager } from 'scaler-primitives/manager';
 * import { toScalerConfig } from 'scaler-primitives/kici';
 * import type { PoolLedger } from 'scaler-primitives/ledger';
 *
 * declare const YAML: { parse(text: string): any }; // the yaml package
 * declare const backends: BackendEntry[];
 * declare const ledger: PoolLedger;
 * let manager: ScalerManager | undefined;
 * const result = toScalerConfig(YAML.parse(readFileSync('/etc/kici/scaler.yaml', 'utf8')));
 * for (const issue of result.issues) console.warn(issue.severity, issue.path.join('.'), issue.message);
 * if (result.ok) {
 *   const pools = Object.keys(result.input.machinePools ?? {});
 *   const ledgers = Object.fromEntries(pools.map((pool) => [pool, ledger]));
 *   manager = new ScalerManager({ config: result.input, backends, ledgers });
 * }
 * ```
 */
export function toScalerConfig(
  kici: KiciScalerConfig,
  options: {
    /**
     * kici setting names (`'roles'`, `'platform'`, ...) whose errors you have read and
     * handled (e.g. with `mandatoryLabels` or in your backend): they are reported as warnings.
     * @default []
     */
    acknowledge?: readonly string[];
  } = {},
): {
  /** True when there is no error: `config` is set. */
  ok: boolean;
  /** The validated config (set when `ok`). */
  config?: ScalerConfig;
  /** The translated config as written, before validation (always set; inspect or edit it). */
  input: ScalerConfigInput;
  /** Every setting without an equivalent and every schema problem, errors first. */
  issues: Array<{
    /** Path in the kici config, e.g. `['scalers', 0, 'roles']`. */
    path: ReadonlyArray<string | number>;
    /**
     * `error`: dropping or moving it changes what is allowed to run (routing, isolation,
     * caps), or the config is invalid. `warning`: behaviour differs in a way that does not
     * loosen a guarantee (pacing, warm-pool size, settings kept for the backend).
     */
    severity: 'error' | 'warning';
    /** What differs and what to do. */
    message: string;
  }>;
} {
  const report = new Report(new Set(options.acknowledge ?? []));
  // kici's automatic labels (`kici:scaler:<name>`); the core's default is `scaler-primitives:`.
  const input: ScalerConfigInput = {
    globalMaxAgents: KICI_GLOBAL_MAX_AGENTS,
    autoLabelPrefix: KICI_AUTO_LABEL_PREFIX,
    scalers: [],
  };
  if (!isObject(kici)) {
    report.error([], 'Expected a kici scaler config object { version: 1, scalers: [...] }');
    return finish(report, input);
  }
  if (kici.version !== 1) {
    report.error(
      ['version'],
      `Expected version: 1 (the only kici scaler config version), got ${JSON.stringify(kici.version)}`,
    );
  }
  for (const [key, value] of Object.entries(kici)) {
    if (value === undefined) continue;
    switch (key) {
      case 'version':
        break;
      case 'globalMaxAgents':
        input.globalMaxAgents = value as number;
        break;
      case 'defaults': {
        if (!isObject(value)) {
          report.error(['defaults'], 'Expected an object { resources? }');
          break;
        }
        for (const k of Object.keys(value))
          if (k !== 'resources') unknownKey(report, ['defaults'], k);
        if (value.resources !== undefined) {
          const resources = report.attempt(['defaults', 'resources'], () =>
            fromKiciResources(value.resources as never),
          );
          if (resources) input.defaults = { resources };
        }
        break;
      }
      case 'globalResourceCap': {
        const cap = report.attempt([key], () => fromKiciCap(value as never));
        if (cap) input.resourceCap = cap;
        break;
      }
      case 'machinePools':
        input.machinePools = translatePools(report, value);
        break;
      case 'scalers':
        if (!Array.isArray(value)) {
          report.error(['scalers'], 'Expected an array of scalers');
          break;
        }
        value.forEach((entry, i) => {
          const scaler = translateScaler(report, entry as KiciScalerEntry, i);
          if (scaler) input.scalers.push(scaler);
        });
        break;
      case 'firecracker':
        report.warning(
          [key],
          "Not a ScalerManager setting: kici's Firecracker network (cidr, bridge, gateway, nft table) belongs to your Firecracker backend. Pass it there.",
        );
        break;
      default:
        unknownKey(report, [], key);
    }
  }
  if (!Array.isArray(kici.scalers)) report.error(['scalers'], 'Expected an array of scalers');
  return finish(report, input);
}

function translatePools(report: Report, value: unknown): ScalerConfigInput['machinePools'] {
  const pools: NonNullable<ScalerConfigInput['machinePools']> = {};
  if (!Array.isArray(value)) {
    report.error(['machinePools'], 'Expected an array of { name, cap }');
    return pools;
  }
  value.forEach((pool: unknown, i) => {
    const at = ['machinePools', i];
    if (!isObject(pool) || typeof pool.name !== 'string') {
      report.error(at, 'Expected a machine pool { name, cap }');
      return;
    }
    for (const k of Object.keys(pool)) if (k !== 'name' && k !== 'cap') unknownKey(report, at, k);
    if (Object.hasOwn(pools, pool.name)) {
      report.error(
        [...at, 'name'],
        `Machine pool "${pool.name}" is declared twice; kici would register the last cap, which then disagrees with the pool file of whichever orchestrator wrote first.`,
      );
      return;
    }
    const cap = report.attempt([...at, 'cap'], () => fromKiciCap(pool.cap as never));
    if (cap) pools[pool.name] = cap;
    report.poolIndex.set(pool.name, i);
  });
  return pools;
}

/**
 * {@link toScalerConfig}, throwing when there is an error.
 *
 * @param kici - The kici config.
 * @param options - `acknowledge`: kici settings whose error you accept (`roles`, `platform`).
 * @returns The validated config and the warnings.
 * @throws `ConfigError` listing every error with its path in the kici config.
 *
 * @example
 * ```ts
 * import { type KiciScalerConfig, parseKiciScalerConfig } from 'scaler-primitives/kici';
 *
 * declare const kiciConfig: KiciScalerConfig;
 * const { config, warnings } = parseKiciScalerConfig(kiciConfig, { acknowledge: ['roles'] });
 * ```
 */
export function parseKiciScalerConfig(
  kici: KiciScalerConfig,
  options?: Parameters<typeof toScalerConfig>[1],
): {
  /** The validated `ScalerManager` config. */
  config: ScalerConfig;
  /** The warnings of the translation (settings kept for the backend, behaviour that differs). */
  warnings: ReturnType<typeof toScalerConfig>['issues'];
} {
  const result = toScalerConfig(kici, options);
  const warnings = result.issues.filter((i) => i.severity === 'warning');
  if (result.ok && result.config) return { config: result.config, warnings };
  const errors = result.issues.filter((i) => i.severity === 'error');
  const lines = errors.map((e) => `  ${formatConfigPath(e.path)}: ${e.message}`);
  throw new ConfigError(
    errors.map((e) => ({ path: e.path, message: e.message })),
    `The kici scaler config cannot be used as it is (${errors.length} problem${errors.length === 1 ? '' : 's'}):\n${lines.join('\n')}`,
  );
}

// One kici scaler entry (its label sets and warm pool) -> a `ScalerManager` scaler entry:
// backend-only settings kept in `options`, settings without an equivalent reported.

// Settings of a kici scaler entry that only its backend reads: kept in `options`.
const BACKEND_SETTINGS = new Set([
  'host',
  'socketPath',
  'runtime',
  'orchestratorUrl',
  'extraHosts',
  'enforceCgroups',
  'firecrackerPath',
  'jailerPath',
  'kernelPath',
  'chrootBaseDir',
  'uid',
  'gid',
  'vcpuCount',
  'memSizeMib',
  'requireSudo',
  'provisioningTargets',
  'claimTtlSeconds',
  'agentTokenTtlSeconds',
]);

// Settings of a kici label set that only its backend reads: kept in `options.labelSets[j]`.
const LABEL_SET_BACKEND_SETTINGS = new Set([
  'image',
  'imagePullPolicy',
  'binaryPath',
  'volumes',
  'containerSocket',
  'env',
  'backpressureMode',
  'networkPolicy',
  'rootfsPath',
  'kernelPath',
  'vcpuCount',
  'memSizeMib',
  'overlayDriveSizeMib',
]);

function translateLabelSet(
  report: Report,
  set: unknown,
  path: Path,
): { set: LabelSetInput; backend: Record<string, unknown> } | undefined {
  if (!isObject(set)) {
    report.error(path, 'Expected a label set object { labels, resources?, ... }');
    return undefined;
  }
  const out: LabelSetInput = { labels: set.labels as string[] };
  const backend: Record<string, unknown> = {};
  // Values are checked one by one below (a hand-written config may hold anything).
  for (const [key, value] of Object.entries(set as object)) {
    if (key === 'labels' || value === undefined) continue;
    if (key === 'resources') {
      const resources = report.attempt([...path, key], () => fromKiciResources(value as never));
      if (resources) out.resources = resources;
    } else if (LABEL_SET_BACKEND_SETTINGS.has(key)) {
      backend[key] = value;
    } else {
      unknownKey(report, path, key);
    }
  }
  if (backend.networkPolicy !== undefined) {
    report.warning(
      [...path, 'networkPolicy'],
      'Kept in options.labelSets[].networkPolicy: ScalerManager does not isolate agents. Your backend must apply it, e.g. with addIsolationRules from scaler-primitives/kici (seed call shape) or scaler-primitives/nftables.',
    );
  }
  return { set: out, backend };
}

/** Translate `scalers[i]`; `undefined` (with an error reported) when it is not an object. */
function translateScaler(
  report: Report,
  entry: KiciScalerEntry,
  i: number,
): ScalerEntryInput | undefined {
  const path = ['scalers', i];
  if (!isObject(entry)) {
    report.error(path, 'Expected a scaler object { name, type, maxAgents, labelSets, ... }');
    return undefined;
  }
  const out: ScalerEntryInput = {
    name: entry.name,
    type: entry.type,
    maxAgents: entry.maxAgents,
    labelSets: [],
  };
  const options: Record<string, unknown> = {};
  const labelSetOptions: Record<string, unknown>[] = [];
  // Values are checked one by one below (a hand-written config may hold anything).
  for (const [key, value] of Object.entries(entry as object)) {
    if (value === undefined || ['name', 'type', 'maxAgents'].includes(key)) continue;
    const at = [...path, key];
    switch (key) {
      case 'labelSets': {
        if (!Array.isArray(value)) {
          report.error(at, 'Expected an array of label sets');
          break;
        }
        value.forEach((set, j) => {
          const translated = translateLabelSet(report, set, [...at, j]);
          if (!translated) return;
          out.labelSets.push(translated.set);
          labelSetOptions.push(translated.backend);
        });
        break;
      }
      case 'mandatoryLabels':
        out.mandatoryLabels = value as string[];
        break;
      case 'machinePool':
        out.machinePool = value as string;
        break;
      case 'resourceCap': {
        const cap = report.attempt(at, () => fromKiciCap(value as never));
        if (cap) out.resourceCap = cap;
        break;
      }
      case 'warmPool':
        translateWarmPool(report, entry, value, at, out);
        break;
      case 'maxConcurrentSpawns':
        options[key] = value;
        report.warning(
          at,
          'No ScalerManager equivalent: kici bounds concurrent backend.spawn calls per scaler (default 8); ScalerManager calls spawn as capacity allows. Kept in options.maxConcurrentSpawns for your backend to bound its own spawns. Caps and the machine pool still hold.',
        );
        break;
      case 'networkIsolation':
        options[key] = value;
        break;
      case 'roles':
        options[key] = value;
        if (Array.isArray(value) && !value.includes('all')) {
          report.error(
            at,
            `No ScalerManager equivalent: kici sends only jobs of roles ${JSON.stringify(value)} to this scaler; ScalerManager would send jobs of every role. Express the restriction with mandatoryLabels (a label the jobs of those roles carry), then acknowledge 'roles'.`,
            'roles',
          );
        }
        break;
      case 'platform': {
        options[key] = value;
        const platform = value as { os?: string; arch?: string };
        const tainted =
          (platform.os !== undefined && platform.os !== 'linux') ||
          (platform.arch !== undefined && platform.arch !== 'x64');
        report[tainted ? 'error' : 'warning'](
          at,
          tainted
            ? `No ScalerManager equivalent: kici labels agents kici:os:${platform.os}/kici:arch:${platform.arch} and taints the scaler so only jobs asking for that platform run here; ScalerManager would send any job whose labels match. Add a mandatory label (e.g. "${platform.os}-${platform.arch}") to the scaler and its label sets, then acknowledge 'platform'.`
            : 'Kept in options.platform: ScalerManager adds no kici:os/kici:arch labels (linux/x64 adds no taint in kici, so routing is unchanged).',
          'platform',
        );
        break;
      }
      default:
        if (BACKEND_SETTINGS.has(key)) options[key] = value;
        else unknownKey(report, path, key);
    }
  }
  // kici isolates agents unless told not to: keep that default visible to the backend.
  options.networkIsolation ??= true;
  if (options.networkIsolation === true) {
    report.warning(
      [...path, 'networkIsolation'],
      'Kept in options.networkIsolation (kici default true): ScalerManager does not isolate agents; your backend must, e.g. with addIsolationRules from scaler-primitives/kici.',
    );
  }
  if (labelSetOptions.some((o) => Object.keys(o).length > 0)) options.labelSets = labelSetOptions;
  out.options = options;
  return out;
}

function translateWarmPool(
  report: Report,
  entry: KiciScalerEntry,
  value: unknown,
  at: Path,
  out: ScalerEntryInput,
): void {
  if (!isObject(value)) {
    report.error(at, 'Expected a warm pool object { enabled, size, idleTimeoutSeconds }');
    return;
  }
  for (const key of Object.keys(value)) {
    if (!['enabled', 'size', 'idleTimeoutSeconds'].includes(key)) unknownKey(report, at, key);
  }
  if (value.enabled !== true) return;
  out.warmPool = { size: (value.size as number | undefined) ?? 0 };
  if (value.idleTimeoutSeconds !== undefined) {
    out.warmPool.idleTimeoutSeconds = value.idleTimeoutSeconds as number;
  }
  const sets = Array.isArray(entry.labelSets) ? entry.labelSets.length : 0;
  if (sets > 1) {
    report.warning(
      [...at, 'size'],
      `kici keeps ${out.warmPool.size} warm agent(s) for each of the ${sets} label sets; ScalerManager keeps them for one label set (warmPool.labelSet, here 0). Add scalers or change warmPool.labelSet to warm another set.`,
    );
  }
}

// The report a translation gathers (errors, acknowledged settings, warnings) and its
// verdict: the translated config validated as a `ScalerManager` config, with our paths
// mapped back to kici's.

/** A path in the kici config, as an issue reports it. */
type Path = ReadonlyArray<string | number>;

/** The issues of one translation; a setting the caller acknowledged turns its error into a warning. */
class Report {
  readonly issues: KiciConfigIssue[] = [];
  // Pool name -> its index in kici's machinePools array, to report our paths as kici's.
  readonly poolIndex = new Map<string, number>();
  constructor(private readonly acknowledged: ReadonlySet<string>) {}

  error(path: Path, message: string, setting?: string): void {
    const severity = setting !== undefined && this.acknowledged.has(setting) ? 'warning' : 'error';
    this.issues.push({ path, severity, message });
  }

  warning(path: Path, message: string): void {
    this.issues.push({ path, severity: 'warning', message });
  }

  // Run a translation step; a thrown error becomes an error issue at `path`.
  attempt<T>(path: Path, step: () => T): T | undefined {
    try {
      return step();
    } catch (error) {
      this.error(path, (error as Error).message);
      return undefined;
    }
  }
}

/** A plain object (not null, not an array). */
function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Report a setting this translation does not know (kici's loader would drop it silently). */
function unknownKey(report: Report, path: Path, key: string): void {
  report.error(
    [...path, key],
    `Unknown setting "${key}": kici's loader would drop it silently; this translation refuses settings it does not know. Remove it or move it where it belongs.`,
  );
}

/** Validate the translated config and turn the report into the answer (errors first, then warnings). */
function finish(report: Report, input: ScalerConfigInput): ReturnType<typeof toScalerConfig> {
  const validation = validateScalerConfig(input);
  if (!validation.ok) {
    for (const error of validation.errors) {
      report.error(
        mapPath(error.path, report.poolIndex),
        `${error.message} (ScalerManager config at ${formatConfigPath(error.path)})`,
      );
    }
  }
  const issues = [
    ...report.issues.filter((i) => i.severity === 'error'),
    ...report.issues.filter((i) => i.severity === 'warning'),
  ];
  const ok = validation.ok && !issues.some((i) => i.severity === 'error');
  return ok && validation.ok
    ? { ok, config: validation.config, input, issues }
    : { ok: false, input, issues };
}

// Our config's paths back to kici's names where they differ.
function mapPath(
  path: ReadonlyArray<string | number>,
  poolIndex: ReadonlyMap<string, number>,
): ReadonlyArray<string | number> {
  if (path[0] === 'resourceCap') return ['globalResourceCap', ...path.slice(1)];
  if (path[0] === 'machinePools' && typeof path[1] === 'string') {
    const index = poolIndex.get(path[1]);
    if (index !== undefined)
      return ['machinePools', index, ...(path.length > 2 ? ['cap', ...path.slice(2)] : ['name'])];
  }
  return path;
}

// The names this file uses for parts of the public types above (each declared once, there).
type KiciScalerEntry = KiciScalerConfig['scalers'][number];
type KiciConfigIssue = ReturnType<typeof toScalerConfig>['issues'][number];
