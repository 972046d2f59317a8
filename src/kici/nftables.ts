/**
 * The kici seed's nftables functions, with its call shapes, on this library's plan builder,
 * writing the seed's table: `ip kici`, the agents' rules appended to its shared chains.
 */
import { InvalidInputError } from '../errors/index.js';
import {
  addIsolationRules as coreAdd,
  parseRuleHandles as coreParseRuleHandles,
  removeIsolationRules as coreRemove,
  validateNftablesAvailability as coreValidate,
  ensureTable,
  type IsolationPolicy,
  type NftOptions,
  validateAgentId,
  validateInterfaceName,
} from '../nftables/index.js';
import { parseAddress } from '../nftables/validate.js';

/**
 * How rules recognise an agent's traffic: `iifname` (the interface packets arrive on:
 * Firecracker TAP, veth) or `saddr` (the agent's source address: containers on a bridge).
 */
export type NftMatchMode = 'iifname' | 'saddr';

/**
 * kici's per-label-set network policy.
 */
export interface KiciNetworkPolicy {
  /** Networks the agent may reach although they are in a blocked range. */
  allowlist?: readonly string[];
  /** Drop everything that is not the gateway or allowlisted. @default false */
  denyAll?: boolean;
  /**
   * kici 0.9.1's host-access entries (`<cidr|address|*>[:<port|*>]`). Not translated: give
   * host ports as `opts.hostAccess` instead. Only absent or empty is accepted.
   */
  hostAccess?: readonly string[];
}

/**
 * The seed's `NftOptions` (`requireSudo`) plus this library's (`netns`, `table`, `family`,
 * `layout`, `nftPath`, `runner`) and the host ports the agent may reach. The adapter's
 * defaults are kici's: `table: 'kici'`, `family: 'ip'`, `layout: 'rules'`.
 */
export interface KiciNftOptions extends NftOptions {
  /**
   * Ports on the host's own addresses the agent may open, e.g. the orchestrator's port
   * (`[8080]`) and DNS (`{ port: 53, protocol: 'udp' }`). Traffic from the agent to the host
   * itself is dropped otherwise; the seed did not filter it at all. @default []
   */
  hostAccess?: IsolationPolicy['hostAccess'];
  /** Called with the error a best-effort {@link removeIsolationRules} swallowed (the seed logged it). */
  onError?: (error: unknown) => void;
}

/**
 * The table the adapter writes unless told otherwise: kici's own `ip kici`, with the seed's
 * layout (each agent's rules appended to the shared base chains).
 */
export const KICI_NFT_TABLE = Object.freeze({
  /** kici's table name. */
  table: 'kici',
  /** IPv4 only, as kici's table. */
  family: 'ip',
  /** The seed's layout: each agent's rules appended to the shared base chains. */
  layout: 'rules',
} as const satisfies NftOptions);

// kici's table, family and layout, unless told otherwise.
function coreOptions(opts: KiciNftOptions | undefined): NftOptions {
  const { hostAccess: _hostAccess, onError: _onError, ...rest } = opts ?? {};
  return { ...KICI_NFT_TABLE, ...rest };
}

// Long enough (> 15 bytes) that no interface name can take it.
const SADDR_PREFIX = 'kici-saddr-';
const IFNAME_HEX_PREFIX = 'kici-ifname-hex-';

/**
 * The agent id the adapter files an identifier's rules under (rule comments `agent=<id>`):
 * an interface name that is a valid agent id is used as is; other interface names are
 * hex-encoded behind `kici-ifname-hex-`; addresses become `kici-saddr-<address>` (canonical
 * form, `:` written `_`). Distinct identifiers never share an id.
 *
 * @param identifier - The interface name or address given to {@link addIsolationRules}.
 * @param matchMode - How it is matched. @default 'iifname'
 * @returns The agent id.
 * @throws `InvalidInputError` for an invalid interface name or address.
 *
 * @example
 * ```ts
 * import { kiciAgentId } from 'scaler-primitives/kici';
 *
 * kiciAgentId('veth-ab12');            // 'veth-ab12'
 * kiciAgentId('172.30.0.5', 'saddr');  // 'kici-saddr-172.30.0.5'
 * ```
 */
export function kiciAgentId(identifier: string, matchMode: NftMatchMode = 'iifname'): string {
  if (matchMode === 'saddr') {
    const address = parseAddress(identifier, 'source address');
    if (address.prefix !== (address.family === 4 ? 32 : 128)) {
      throw new InvalidInputError(
        'source address',
        identifier,
        `Invalid source address ${JSON.stringify(identifier)}: expected one IPv4 or IPv6 address, not a network.`,
      );
    }
    return validateAgentId(`${SADDR_PREFIX}${address.address.replaceAll(':', '_')}`);
  }
  if (matchMode !== 'iifname') {
    throw new InvalidInputError(
      'match mode',
      matchMode,
      `Invalid match mode ${JSON.stringify(matchMode)}: expected 'iifname' or 'saddr'.`,
    );
  }
  const name = validateInterfaceName(identifier);
  try {
    return validateAgentId(name);
  } catch {
    return `${IFNAME_HEX_PREFIX}${Buffer.from(name).toString('hex')}`;
  }
}

function policyFor(
  identifier: string,
  gatewayIp: string,
  networkPolicy: KiciNetworkPolicy | undefined,
  matchMode: NftMatchMode,
  opts: KiciNftOptions | undefined,
): IsolationPolicy {
  const policy = networkPolicy ?? {};
  if (typeof policy !== 'object' || policy === null || Array.isArray(policy)) {
    throw new InvalidInputError(
      'network policy',
      networkPolicy,
      'Expected the network policy to be an object { allowlist?, denyAll? }.',
    );
  }
  for (const key of Object.keys(policy)) {
    if (!['allowlist', 'denyAll', 'hostAccess'].includes(key)) {
      throw new InvalidInputError(
        'network policy',
        networkPolicy,
        `Unknown network policy key ${JSON.stringify(key)}; expected allowlist, denyAll.`,
      );
    }
  }
  if (policy.hostAccess !== undefined && policy.hostAccess.length > 0) {
    throw new InvalidInputError(
      'network policy',
      networkPolicy,
      `networkPolicy.hostAccess (${JSON.stringify(policy.hostAccess)}) is not translated: pass the host ports the agent may reach as opts.hostAccess (e.g. [8080, { port: 53, protocol: 'udp' }]).`,
    );
  }
  const rules = {
    gateway: gatewayIp,
    allowlist: policy.allowlist ?? [],
    denyAll: policy.denyAll ?? false,
    hostAccess: opts?.hostAccess ?? [],
  };
  return matchMode === 'saddr'
    ? { saddr: identifier, ...rules }
    : { iifname: identifier, ...rules };
}

/**
 * Check that nft runs with the privileges it needs (`nft list tables`), as the seed's
 * function does.
 *
 * @param opts - `requireSudo` and this library's nft options.
 * @throws NftNotInstalledError when nft (or sudo) is missing; NftPermissionError without
 *   CAP_NET_ADMIN (the message names `requireSudo`); NftCommandError otherwise.
 *
 * @example
 * ```ts
 * import { validateNftablesAvailability } from 'scaler-primitives/kici';
 *
 * await validateNftablesAvailability({ requireSudo: true });
 * ```
 */
export async function validateNftablesAvailability(opts?: KiciNftOptions): Promise<void> {
  await coreValidate(coreOptions(opts));
}

/**
 * Create kici's table `ip kici` with its `forward` and `output` chains, as the seed does, plus
 * an `input` chain for the agent's traffic to the host itself (the seed left the host open),
 * or add whichever is missing. Idempotent and safe to call concurrently, also on a table a
 * kici process made: its chains and rules are kept as they are.
 *
 * @param opts - `requireSudo` and this library's nft options.
 * @throws nft errors as {@link validateNftablesAvailability}.
 *
 * @example
 * ```ts
 * import { ensureKiciTable } from 'scaler-primitives/kici';
 *
 * await ensureKiciTable();
 * ```
 */
export async function ensureKiciTable(opts?: KiciNftOptions): Promise<void> {
  await ensureTable(coreOptions(opts));
}

/**
 * Isolate the agent behind `identifier`, with the seed's arguments, in **one** nft
 * transaction (the seed ran one process per rule, so a failure half-way left an agent
 * half-isolated). Re-applying replaces the agent's rules instead of adding a second set.
 * The rules go to `ip kici` as the seed's do (appended to `forward`, plus `input`), each
 * tagged with the comment `agent=<kiciAgentId(identifier)> policy=<digest>`, the tag removal
 * matches exactly.
 *
 * Rules, in order: established/related accept, `gatewayIp` accept, metadata addresses drop
 * (an allowlist cannot re-open them), `allowlist` accept, private/shared/link-local ranges
 * drop, everything else drop when `denyAll`: IPv4 only, as `ip kici` sees no IPv6 packet
 * (pass `family: 'inet'` and another `table` to filter IPv6 too). Traffic to the host's own
 * addresses is dropped except `opts.hostAccess` ports (the seed left the host open).
 *
 * @param identifier - Interface name (`iifname`) or the agent's address (`saddr`).
 * @param gatewayIp - An address that stays reachable through the forward path.
 * @param networkPolicy - `{ allowlist?, denyAll? }`.
 * @param matchMode - `'iifname'` (default) or `'saddr'`.
 * @param opts - `requireSudo`, `hostAccess` and this library's nft options.
 * @throws `InvalidInputError` for an invalid identifier, address, CIDR or policy key, and
 *   for an IPv6 `saddr` identifier in the `ip` table, before nft runs; nft errors as
 *   {@link validateNftablesAvailability}.
 *
 * @example
 * ```ts
 * import { addIsolationRules } from 'scaler-primitives/kici';
 *
 * await addIsolationRules('tap-ab12', '172.30.0.1', { allowlist: ['10.1.2.0/24'] }, 'iifname', {
 *   hostAccess: [8080],
 * });
 * ```
 */
export async function addIsolationRules(
  identifier: string,
  gatewayIp: string,
  networkPolicy?: KiciNetworkPolicy,
  matchMode: NftMatchMode = 'iifname',
  opts?: KiciNftOptions,
): Promise<void> {
  const agentId = kiciAgentId(identifier, matchMode);
  const policy = policyFor(identifier, gatewayIp, networkPolicy, matchMode, opts);
  await coreAdd(agentId, policy, coreOptions(opts));
}

/**
 * Remove every rule of the agent behind `identifier` (interface name or address, whichever
 * mode it was added with), each removal one transaction. Only rules tagged with that agent
 * exactly are removed: rules of other agents are kept even when their identifier starts the
 * same way (the seed's substring match removed `veth-abc`'s rules with `veth-ab`'s), and so
 * are untagged rules a kici process wrote into the same table. Best effort, as in the seed:
 * never throws; failures go to `opts.onError`.
 *
 * @param interfaceName - The identifier given to {@link addIsolationRules}.
 * @param opts - `requireSudo`, `onError` and this library's nft options.
 *
 * @example
 * ```ts
 * import { removeIsolationRules } from 'scaler-primitives/kici';
 *
 * declare const log: { warn(message: string): void };
 * await removeIsolationRules('tap-ab12', { onError: (e) => log.warn(String(e)) });
 * ```
 */
export async function removeIsolationRules(
  interfaceName: string,
  opts?: KiciNftOptions,
): Promise<void> {
  const ids = new Set<string>();
  for (const mode of ['iifname', 'saddr'] as const) {
    try {
      ids.add(kiciAgentId(interfaceName, mode));
    } catch {
      // Not an identifier of this mode.
    }
  }
  if (ids.size === 0) {
    opts?.onError?.(
      new InvalidInputError(
        'identifier',
        interfaceName,
        `Invalid identifier ${JSON.stringify(interfaceName)}: expected an interface name or an IP address.`,
      ),
    );
    return;
  }
  for (const id of ids) {
    await coreRemove(id, { ...coreOptions(opts), bestEffort: true, onError: opts?.onError });
  }
}

/**
 * Handles of the rules in `nft -a list chain` text whose interface, address or uid equals
 * `identifier` **exactly**, or whose comment names agent `identifier` (the seed matched any
 * line containing the text, so `veth-ab` also matched `veth-abc`).
 *
 * @param nftOutput - Output of `nft -a list chain <family> <table> <chain>`.
 * @param identifier - Interface name, address or uid.
 * @returns The handles, in listing order.
 *
 * @example
 * ```ts
 * import { parseRuleHandles } from 'scaler-primitives/kici';
 *
 * parseRuleHandles('iifname "veth-abc" drop # handle 7\niifname "veth-ab" drop # handle 8', 'veth-ab'); // [8]
 * ```
 */
export function parseRuleHandles(nftOutput: string, identifier: string): number[] {
  if (typeof nftOutput !== 'string' || typeof identifier !== 'string') {
    throw new TypeError('Expected `nftOutput` and `identifier` to be strings');
  }
  return coreParseRuleHandles(nftOutput, identifier);
}
