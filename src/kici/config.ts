/**
 * kici's scaler config -> a `ScalerManager` config, with a report of what has no equivalent.
 */
import { ConfigError } from '../errors.js';
import { formatConfigPath, type ScalerConfigInput } from '../manager/index.js';
import { finish, isObject, Report, unknownKey } from './config-report.js';
import { translateScaler } from './config-scaler.js';
import type {
  KiciConfigTranslation,
  KiciParsedConfig,
  KiciScalerConfig,
  KiciScalerEntry,
  ToScalerConfigOptions,
} from './config-types.js';
import { fromKiciCap, fromKiciResources } from './resources.js';

/**
 * kici's automatic-label prefix, which `toScalerConfig` sets (the core's default is `scaler-primitives:`).
 *
 * @example
 * ```ts
 * import { KICI_AUTO_LABEL_PREFIX, type KiciScalerConfig, toScalerConfig } from 'scaler-primitives/kici';
 * declare const kiciConfig: KiciScalerConfig;
 * const { input } = toScalerConfig(kiciConfig);
 * input.autoLabelPrefix === KICI_AUTO_LABEL_PREFIX; // true: agents carry 'kici:scaler:<name>'
 * ```
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
 *   `getScalerContextForAgent` hands to the backend; `networkIsolation` is made explicit
 *   (kici's default `true`).
 * - Settings that would widen what runs where (`roles`, a non-linux/x64 `platform`) are
 *   errors until acknowledged; unknown settings (which kici drops silently) are errors.
 *
 * @param kici - The kici config (e.g. `YAML.parse` of its scaler file).
 * @param options - See {@link ToScalerConfigOptions}.
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
 * if (result.ok) manager = new ScalerManager({ config: result.input, backends, ledger });
 * ```
 */
export function toScalerConfig(
  kici: KiciScalerConfig,
  options: ToScalerConfigOptions = {},
): KiciConfigTranslation {
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
 * @param options - See {@link ToScalerConfigOptions}.
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
  options?: ToScalerConfigOptions,
): KiciParsedConfig {
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
