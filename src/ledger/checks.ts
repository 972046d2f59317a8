/**
 * Argument checks shared by ledger backends: programmer misuse raises a plain
 * `TypeError` naming the argument, the accepted form and the value given; a
 * value of the right type that is refused (too long, an unknown option key)
 * raises `InvalidInputError`.
 */
import { InvalidInputError } from '../errors/index.js';
import { nearest } from '../internal/strict-keys.js';
import {
  deviceIdsProblem,
  extendedNameProblem,
  validateExtendedResourceName,
} from '../resources/names.js';
import type { ResourceCap } from '../resources/types.js';
import { normalizeCap } from './document/cap.js';
import { assertKiciCompatibleCap } from './document/extended.js';
import {
  type AdoptRequest,
  MAX_ADOPT,
  type RegisterPoolOptions,
  type ReserveOptions,
} from './types.js';

/** An optional timing option: `fallback` when undefined, else a finite number > 0. */
export function positiveOption(name: string, value: number | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0) {
    throw new TypeError(`Expected \`${name}\` to be a finite number > 0, got \`${String(value)}\``);
  }
  return value;
}

/** A CPU or memory amount (or an interval): a finite number >= 0. */
export function checkAmount(name: string, value: unknown): void {
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0) {
    throw new TypeError(
      `Expected \`${name}\` to be a finite number >= 0, got \`${String(value)}\``,
    );
  }
}

/**
 * An agent id: a non-empty string of at most {@link MAX_ID_LENGTH} characters.
 */
export function checkAgentId(agentId: unknown): void {
  checkId('agentId', agentId);
}

/**
 * The checks of `reserve` after the backend's own pool-name check, in the order
 * both ledgers make them: the pool is registered, then the agent id, then the amounts.
 */
export function checkReserve(
  registered: ReadonlyMap<string, unknown>,
  pool: string,
  agentId: unknown,
  cpus: unknown,
  memBytes: unknown,
): void {
  if (!registered.has(pool)) {
    throw new TypeError(
      `Pool ${JSON.stringify(pool)} is not registered; call registerPool(${JSON.stringify(pool)}, cap) first`,
    );
  }
  checkAgentId(agentId);
  checkAmount('cpus', cpus);
  checkAmount('memBytes', memBytes);
}

/**
 * The extended resources of `reserve`'s options, validated: an object of
 * extended resource names to whole counts >= 0. Zero counts are left out;
 * `undefined` when nothing remains (the row then has no `extended` field).
 *
 * @throws TypeError when `options` or `extended` is not an object, or a count is not a whole number >= 0.
 * @throws InvalidInputError for an unknown option key or an invalid resource name.
 */
export function checkReserveOptions(
  options: ReserveOptions | undefined,
): Record<string, number> | undefined {
  if (options === undefined) return undefined;
  checkKnownKeys('reserve options', options, ['extended']);
  const extended: unknown = options.extended;
  if (extended === undefined) return undefined;
  if (typeof extended !== 'object' || extended === null || Array.isArray(extended)) {
    throw new TypeError(
      `Expected \`extended\` to be an object of whole counts like { "nvidia.com/gpu": 1 }, got \`${String(extended)}\``,
    );
  }
  let out: Record<string, number> | undefined;
  for (const [name, count] of Object.entries(extended)) {
    const problem = extendedNameProblem(name);
    if (problem !== undefined) {
      throw new InvalidInputError(
        'extended resource name',
        name,
        `Invalid extended resource name ${JSON.stringify(name.slice(0, 80))} in reserve options: ${problem}. Expected <dns-prefix>/<name>, e.g. "nvidia.com/gpu".`,
      );
    }
    if (typeof count !== 'number' || !Number.isSafeInteger(count) || count < 0) {
      throw new TypeError(
        `Expected \`extended["${name}"]\` to be a whole number >= 0, got \`${String(count)}\``,
      );
    }
    if (count > 0) {
      out ??= {};
      out[name] = count;
    }
  }
  return out;
}

/**
 * The cap `registerPool` stores: normalized, and for a pool marked
 * `kiciCompatible` refused when kici writers could not enforce it.
 *
 * @throws TypeError, InvalidInputError for a bad cap or options.
 */
export function registeredCap(
  name: string,
  cap: ResourceCap,
  options: RegisterPoolOptions | undefined,
): ResourceCap {
  checkKnownKeys('registerPool options', options, ['kiciCompatible']);
  const kici = options?.kiciCompatible;
  if (kici !== undefined && typeof kici !== 'boolean') {
    throw new TypeError(`Expected \`kiciCompatible\` to be a boolean, got \`${String(kici)}\``);
  }
  const normalized = normalizeCap(cap);
  if (kici === true) assertKiciCompatibleCap(name, normalized);
  return normalized;
}

/**
 * The longest agent id or instance id the ledgers accept, in characters: 256
 * (a Kubernetes object name, 253, fits). Rows carry both in every pool document
 * and every message that names them, on disk and in NATS KV.
 */
export const MAX_ID_LENGTH = 256;

/** An instance id: a non-empty string of at most {@link MAX_ID_LENGTH} characters. */
export function checkInstanceId(instanceId: unknown): void {
  checkId('instanceId', instanceId);
}

function checkId(name: string, value: unknown): void {
  if (typeof value !== 'string' || value === '') {
    throw new TypeError(`Expected \`${name}\` to be a non-empty string, got \`${String(value)}\``);
  }
  if (value.length > MAX_ID_LENGTH) {
    throw new InvalidInputError(
      name,
      value,
      `Expected \`${name}\` to be at most ${MAX_ID_LENGTH} characters, got ${value.length} (starting ${JSON.stringify(value.slice(0, 32))}).`,
    );
  }
}

/**
 * Refuse keys of an options object that are not in `accepted`, naming the key,
 * the nearest accepted one and all of them. `undefined` and `null` pass.
 *
 * @throws InvalidInputError for the first unknown key.
 * @throws TypeError when `value` is not an object.
 */
export function checkKnownKeys(what: string, value: unknown, accepted: readonly string[]): void {
  if (value === undefined || value === null) return;
  if (typeof value !== 'object' || Array.isArray(value)) {
    throw new TypeError(`Expected \`${what}\` to be an object, got \`${String(value)}\``);
  }
  for (const key of Object.keys(value)) {
    if (accepted.includes(key)) continue;
    const near = nearest(key, accepted);
    const hint = near === undefined ? '' : ` Did you mean \`${near}\`?`;
    throw new InvalidInputError(
      `${what} key`,
      key,
      `Unknown key ${JSON.stringify(key)} in ${what}.${hint} Accepted keys: ${accepted.join(', ')}.`,
    );
  }
}

/**
 * Check the agents of an `adopt` call: an array of 1 to {@link MAX_ADOPT}
 * `{ agentId, cpus, memBytes, extended? }`, each as `reserve` checks it, no
 * agent twice.
 *
 * @returns The requests, with `extended` normalized (zero counts dropped).
 * @throws TypeError or InvalidInputError naming the bad value.
 */
export function checkAdopt(
  registered: ReadonlyMap<string, unknown>,
  pool: string,
  agents: unknown,
): AdoptRequest[] {
  if (!Array.isArray(agents) || agents.length === 0 || agents.length > MAX_ADOPT) {
    throw new TypeError(
      `Expected \`agents\` to be an array of 1 to ${MAX_ADOPT} { agentId, cpus, memBytes, extended? }, got \`${Array.isArray(agents) ? `${agents.length} entries` : typeof agents}\``,
    );
  }
  const seen = new Set<string>();
  return agents.map((agent: unknown) => {
    if (typeof agent !== 'object' || agent === null || Array.isArray(agent)) {
      throw new TypeError(`Expected each agent to adopt to be an object, got \`${String(agent)}\``);
    }
    checkKnownKeys('adopt entry', agent, ['agentId', 'cpus', 'memBytes', 'extended', 'devices']);
    const { agentId, cpus, memBytes, extended, devices } = agent as AdoptRequest;
    checkReserve(registered, pool, agentId, cpus, memBytes);
    if (seen.has(agentId)) {
      throw new TypeError(
        `Expected each agent once in \`agents\`, got \`${agentId.slice(0, 64)}\` twice`,
      );
    }
    seen.add(agentId);
    const normalized = checkReserveOptions(extended === undefined ? undefined : { extended });
    const out: AdoptRequest = { agentId, cpus, memBytes };
    if (normalized !== undefined) out.extended = normalized;
    if (devices !== undefined) out.devices = checkAgentDevices(agentId, devices, normalized);
    return out;
  });
}

/**
 * Check the device ids an agent to adopt says it uses: by extended resource,
 * unique valid ids, as many as the agent holds of that resource.
 *
 * @throws InvalidInputError naming the agent, the resource and the bad value.
 */
function checkAgentDevices(
  agentId: string,
  devices: unknown,
  extended: Readonly<Record<string, number>> | undefined,
): Record<string, string[]> {
  const where = `devices of agent ${JSON.stringify(agentId.slice(0, 64))}`;
  if (typeof devices !== 'object' || devices === null || Array.isArray(devices)) {
    throw new InvalidInputError(
      'device ids',
      devices,
      `Expected the ${where} to be an object of device id arrays by resource, e.g. { "nvidia.com/gpu": ["1"] }, got \`${String(devices)}\``,
    );
  }
  const out: Record<string, string[]> = {};
  for (const [name, ids] of Object.entries(devices)) {
    validateExtendedResourceName(name, where);
    const count = extended?.[name] ?? 0;
    if (!Array.isArray(ids) || ids.length !== count || deviceIdsProblem(ids, 0) !== undefined) {
      throw new InvalidInputError(
        'device ids',
        ids,
        `Expected the ${where} for ${name} to be ${count} distinct device ids (as many as the agent holds of ${name}), got \`${JSON.stringify(ids)?.slice(0, 200)}\``,
      );
    }
    out[name] = [...ids];
  }
  return out;
}
