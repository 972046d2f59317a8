/**
 * The optional limits wrapper of the process backend: the agent's command runs
 * under `systemd-run --scope` with its CPU and memory limits as `CPUQuota=` and
 * `MemoryMax=` properties, rendered by agent-caps (the values and the lines a
 * drop-in for the scope would hold), so the two never disagree.
 */
import { capsFromResources, renderDropIn } from '../agent-caps/index.js';
import type { ResourceLimits } from '../resources/index.js';

/** A wrapper that applies an agent's resource limits: the values of `ProcessBackendOptions.limits`. */
export type ProcessLimits = 'systemd-run';

// Every wrapper, once: a value the type gains and this record lacks is a compile error.
const WRAPPERS: Record<ProcessLimits, true> = { 'systemd-run': true };

/** Check the `limits` option: `undefined` or one of the wrappers. */
export function checkProcessLimits(value: unknown): ProcessLimits | undefined {
  if (value === undefined || (typeof value === 'string' && Object.hasOwn(WRAPPERS, value))) {
    return value as ProcessLimits | undefined;
  }
  throw new TypeError(
    `Expected \`limits\` to be ${Object.keys(WRAPPERS)
      .map((w) => `'${w}'`)
      .join(', ')} or undefined, got \`${String(value)}\``,
  );
}

/**
 * The argv that goes before the agent's command for `wrapper`:
 * `systemd-run --scope --quiet [-p CPUQuota=<n>%] [-p MemoryMax=<size>] --`,
 * one property per limit the request sets (`resources.limits`; an unset limit
 * sets no property, as agent-caps leaves it out).
 */
export function limitsPrefix(wrapper: ProcessLimits, limits: ResourceLimits): string[] {
  // `[Scope]`, then one `Key=Value` line per cap: the same assignments, as properties.
  const dropIn = renderDropIn(capsFromResources(limits), { section: 'Scope' });
  const properties = dropIn
    .split('\n')
    .slice(1)
    .filter((line) => line !== '')
    .flatMap((line) => ['-p', line]);
  return [wrapper, '--scope', '--quiet', ...properties, '--'];
}
