import {
  type AgentCaps,
  CAPS_OPTION_KEYS,
  type CapsValueOptions,
  checkCaps,
  checkCapsOptions,
} from './codec.js';

/**
 * The unit sections a resource-control drop-in can target.
 */
export const DropInSection = {
  /** A `.service` unit. */
  Service: 'Service',
  /** A `.scope` unit (e.g. a container started by a manager with `systemd-run --scope`). */
  Scope: 'Scope',
  /** A `.slice` unit (caps on a whole group of units). */
  Slice: 'Slice',
} as const;

/**
 * One of the values of {@link DropInSection}.
 */
export type DropInSectionName = (typeof DropInSection)[keyof typeof DropInSection];

/**
 * Options of {@link renderDropIn}.
 */
export interface RenderDropInOptions extends CapsValueOptions {
  /**
   * The unit section the settings go under.
   * @default 'Service'
   */
  section?: DropInSectionName;
}

/**
 * Render the text of a systemd drop-in that applies `caps`:
 *
 * ```ini
 * [Service]
 * CPUQuota=400%
 * MemoryMax=8G
 * ```
 *
 * One `Key=Value` line per set field, ending with a newline. Empty caps
 * render the empty string: remove the drop-in file rather than writing it.
 *
 * @param caps - The caps; checked against the systemd grammar first, since systemd ignores an invalid line and leaves the unit uncapped.
 * @param options - `section` (default `Service`), `allowMemoryPercent`.
 * @throws {@link errors!CapsValueError} when a value is not valid systemd syntax.
 * @throws {@link errors!InvalidInputError} for an unknown key in `caps` or `options`.
 * @throws `TypeError` when `section` is not one of `Service`, `Scope`, `Slice`.
 *
 * @example
 * ```ts
 * import { renderDropIn } from 'scaler-primitives/agent-caps';
 *
 * renderDropIn({ memoryMax: '8G' }, { section: 'Scope' }); // '[Scope]\nMemoryMax=8G\n'
 * ```
 */
export function renderDropIn(
  caps: AgentCaps,
  options?: {
    /**
     * Accept a percentage for `memoryMax` (`"50%"` of the host's memory). Refused by
     * default: caps travel between hosts with different amounts of memory.
     * @default false
     */
    allowMemoryPercent?: boolean;
    /**
     * The unit section the settings go under: a `.service`, a `.scope` (e.g. a container
     * started with `systemd-run --scope`) or a `.slice` (caps on a whole group of units).
     * @default 'Service'
     */
    section?: 'Service' | 'Scope' | 'Slice';
  },
): string {
  const opts = checkCapsOptions<RenderDropInOptions>(
    options,
    [...CAPS_OPTION_KEYS, 'section'],
    'drop-in options',
  );
  const section = opts.section ?? DropInSection.Service;
  if (!Object.values(DropInSection).includes(section)) {
    throw new TypeError(
      `Expected \`section\` to be one of Service, Scope, Slice, got \`${String(section)}\``,
    );
  }
  checkCaps(caps, opts);
  const lines: string[] = [];
  if (typeof caps.cpuQuota === 'string') lines.push(`CPUQuota=${caps.cpuQuota}`);
  if (typeof caps.memoryMax === 'string') lines.push(`MemoryMax=${caps.memoryMax}`);
  if (lines.length === 0) return '';
  return `[${section}]\n${lines.join('\n')}\n`;
}
