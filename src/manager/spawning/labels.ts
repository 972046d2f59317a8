import type { NoMatchReason } from '../types.js';

/**
 * True when a job names every mandatory label of a scaler (the taint-like gate).
 * An empty `mandatoryLabels` lets every job through.
 *
 * @param jobLabels - The labels the job asks for (`runsOn`).
 * @param mandatoryLabels - The scaler's mandatory labels.
 * @internal
 */
export function passesMandatoryGate(
  jobLabels: readonly string[],
  mandatoryLabels: readonly string[],
): boolean {
  for (const label of mandatoryLabels) if (!jobLabels.includes(label)) return false;
  return true;
}

/**
 * True when an agent with `agentLabels` may run a job: it holds every job label,
 * the job names every mandatory label, and it holds none of the excluded labels.
 *
 * @param jobLabels - The labels the job asks for.
 * @param agentLabels - The label set (automatic labels included).
 * @param options - The scaler's `mandatoryLabels` and the job's `excludeLabels`.
 * @internal
 */
export function labelSetMatches(
  jobLabels: readonly string[],
  agentLabels: readonly string[],
  options: { mandatoryLabels?: readonly string[]; excludeLabels?: readonly string[] } = {},
): boolean {
  if (!passesMandatoryGate(jobLabels, options.mandatoryLabels ?? [])) return false;
  for (const label of jobLabels) if (!agentLabels.includes(label)) return false;
  for (const label of options.excludeLabels ?? []) if (agentLabels.includes(label)) return false;
  return true;
}

/**
 * The automatic labels of a scaler: `<prefix>scaler:<name>` followed by the
 * platform labels the host supplies for its backend.
 *
 * @param prefix - The reserved prefix (`autoLabelPrefix`).
 * @param scaler - The scaler name.
 * @param platformLabels - Labels the host supplies, each starting with `prefix`.
 * @internal
 */
export function automaticLabels(
  prefix: string,
  scaler: string,
  platformLabels: readonly string[] = [],
): string[] {
  const out = [`${prefix}scaler:${scaler}`];
  for (const label of platformLabels) if (!out.includes(label)) out.push(label);
  return out;
}

/** A label set compiled for matching. */
export interface CompiledLabelSet {
  index: number;
  labels: string[];
  set: Set<string>;
}

/**
 * Find the first label set of a scaler that fits a job, or say why none does.
 * @internal
 */
export function explainMatch(
  scaler: string,
  labelSets: readonly CompiledLabelSet[],
  mandatory: readonly string[],
  jobLabels: readonly string[],
  jobSet: ReadonlySet<string>,
  exclude: readonly string[],
): CompiledLabelSet | NoMatchReason {
  const missingMandatory = mandatory.filter((m) => !jobSet.has(m));
  if (missingMandatory.length > 0) {
    return { scaler, reason: 'mandatory', missing: missingMandatory };
  }
  let fewestMissing: string[] | undefined;
  let excluded: string[] | undefined;
  for (const labelSet of labelSets) {
    let missing: string[] | undefined;
    for (const label of jobLabels) {
      if (labelSet.set.has(label)) continue;
      missing ??= [];
      missing.push(label);
    }
    if (missing !== undefined) {
      if (fewestMissing === undefined || missing.length < fewestMissing.length) {
        fewestMissing = missing;
      }
      continue;
    }
    const hit = exclude.filter((label) => labelSet.set.has(label));
    if (hit.length === 0) return labelSet;
    excluded ??= hit;
  }
  if (excluded !== undefined) return { scaler, reason: 'exclude', excluded };
  return { scaler, reason: 'labels', missing: fewestMissing ?? [] };
}
