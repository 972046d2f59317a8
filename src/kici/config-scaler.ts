/**
 * One kici scaler entry (its label sets and warm pool) -> a `ScalerManager`
 * scaler entry: backend-only settings kept in `options`, settings without an
 * equivalent reported.
 */
import type { ScalerConfigInput } from '../manager/index.js';
import { isObject, type Path, type Report, unknownKey } from './config-report.js';
import type { KiciScalerEntry } from './config-types.js';
import { fromKiciCap, fromKiciResources } from './resources.js';

type ScalerEntryInput = ScalerConfigInput['scalers'][number];
type LabelSetInput = ScalerEntryInput['labelSets'][number];

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
  for (const [key, value] of Object.entries(set)) {
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
export function translateScaler(
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
  for (const [key, value] of Object.entries(entry)) {
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
