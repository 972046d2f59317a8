/**
 * The report a kici config translation gathers (errors, acknowledged settings,
 * warnings) and its verdict: the translated config validated as a
 * `ScalerManager` config, with our paths mapped back to kici's.
 */
import {
  formatConfigPath,
  type ScalerConfigInput,
  validateScalerConfig,
} from '../manager/index.js';
import type { KiciConfigIssue, KiciConfigTranslation } from './config-types.js';

/** A path in the kici config, as an issue reports it. */
export type Path = ReadonlyArray<string | number>;

/** The issues of one translation; a setting the caller acknowledged turns its error into a warning. */
export class Report {
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
export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Report a setting this translation does not know (kici's loader would drop it silently). */
export function unknownKey(report: Report, path: Path, key: string): void {
  report.error(
    [...path, key],
    `Unknown setting "${key}": kici's loader would drop it silently; this translation refuses settings it does not know. Remove it or move it where it belongs.`,
  );
}

/** Validate the translated config and turn the report into the answer (errors first, then warnings). */
export function finish(report: Report, input: ScalerConfigInput): KiciConfigTranslation {
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
