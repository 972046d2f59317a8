import { InvalidInputError } from '../errors/index.js';
import { strictObject } from '../internal/strict-keys.js';
import {
  type Cidr,
  parseAddress,
  parseCidr,
  validateInterfaceName,
  validatePort,
  validateUid,
} from './validate.js';

/**
 * An agent's identity plus its rules. The identity says how the rules recognise the agent's
 * packets: exactly one of `iifname` (the interface they arrive on: TAP or veth, for
 * Firecracker and VMs), `saddr` (its source address: containers on a bridge) or `skuid` (the
 * uid of the local process that sends: bare-metal agents, output hook). The rules say what
 * it may and may not reach.
 */
export type IsolationPolicy = (
  | {
      /** Interface name, e.g. `tap-ab12`. Matched exactly, never as a prefix. */
      iifname: string;
      /** Not set: an identity has exactly one of `iifname`, `saddr`, `skuid`. */
      saddr?: never;
      /** Not set: an identity has exactly one of `iifname`, `saddr`, `skuid`. */
      skuid?: never;
    }
  | {
      /** The agent's own IPv4 or IPv6 address (a single address, not a network). */
      saddr: string;
      /** Not set: an identity has exactly one of `iifname`, `saddr`, `skuid`. */
      iifname?: never;
      /** Not set: an identity has exactly one of `iifname`, `saddr`, `skuid`. */
      skuid?: never;
    }
  | {
      /** Numeric uid the agent's processes run as. */
      skuid: number;
      /** Not set: an identity has exactly one of `iifname`, `saddr`, `skuid`. */
      iifname?: never;
      /** Not set: an identity has exactly one of `iifname`, `saddr`, `skuid`. */
      saddr?: never;
    }
) & {
  /**
   * Addresses that stay reachable through the forward path even inside a blocked range
   * (e.g. an upstream router or proxy on a private network). Traffic to the host itself is
   * governed by `hostAccess`, not by this field.
   */
  gateway?: string | readonly string[];
  /** Networks excepted from the blocked ranges (and from `denyAll`). @default [] */
  allowlist?: readonly string[];
  /** Drop everything that is not `gateway` or `allowlist`ed. @default false */
  denyAll?: boolean;
  /**
   * Ports on the host's own addresses the agent may open (e.g. the orchestrator's port, DNS
   * as `{ port: 53, protocol: 'udp' }`); a bare number means TCP, a port is 1-65535.
   * Everything else addressed to the host from the agent is dropped. Not available for
   * `skuid` agents, which run on the host itself.
   * @default []
   */
  hostAccess?: readonly (number | { port: number; protocol?: 'tcp' | 'udp' })[];
  /**
   * Metadata service addresses, dropped before the allowlist is consulted (an allowlist entry
   * cannot re-open them; pass `[]` to allow them).
   * @default ['169.254.169.254', 'fd00:ec2::254']
   */
  metadata?: readonly string[];
  /**
   * Ranges dropped unless allowlisted.
   * @default {@link DEFAULT_BLOCKED_RANGES}
   */
  blocked?: readonly string[];
};

/** What an agent may and may not reach: the policy without its identity. */
export type IsolationRules = Omit<IsolationPolicy, 'iifname' | 'saddr' | 'skuid'>;

/** A port on the host's own addresses the agent may reach; a bare number means TCP. */
export type HostPort = NonNullable<IsolationPolicy['hostAccess']>[number];

/**
 * Private, shared, link-local and unique-local ranges an agent may not reach by default.
 */
export const DEFAULT_BLOCKED_RANGES: readonly string[] = Object.freeze([
  '10.0.0.0/8',
  '172.16.0.0/12',
  '192.168.0.0/16',
  '100.64.0.0/10',
  '169.254.0.0/16',
  'fc00::/7',
  'fe80::/10',
]);

/**
 * Cloud metadata endpoints (AWS/GCP/Azure IPv4, AWS IPv6). Add e.g. `100.100.100.200` for Alibaba.
 */
export const DEFAULT_METADATA_ADDRESSES: readonly string[] = Object.freeze([
  '169.254.169.254',
  'fd00:ec2::254',
]);

/** A policy after validation: every address parsed and normalized, every list de-duplicated. */
export interface NormalizedPolicy {
  readonly identity:
    | { readonly kind: 'iifname'; readonly value: string }
    | { readonly kind: 'saddr'; readonly value: Cidr }
    | { readonly kind: 'skuid'; readonly value: number };
  readonly gateway: readonly Cidr[];
  readonly allowlist: readonly Cidr[];
  readonly metadata: readonly Cidr[];
  readonly blocked: readonly Cidr[];
  readonly denyAll: boolean;
  readonly hostAccess: { readonly tcp: readonly number[]; readonly udp: readonly number[] };
}

/** Every key an isolation policy may have. */
export const POLICY_KEYS: readonly string[] = Object.freeze([
  'iifname',
  'saddr',
  'skuid',
  'gateway',
  'allowlist',
  'denyAll',
  'hostAccess',
  'metadata',
  'blocked',
]);

/** The most entries any one list of a policy may hold (addresses, networks, ports). */
export const MAX_POLICY_LIST = 256;

function list(value: unknown, field: string): readonly unknown[] {
  if (value === undefined) return [];
  if (!Array.isArray(value)) {
    throw new TypeError(`Expected \`${field}\` to be an array, got \`${typeof value}\``);
  }
  if (value.length > MAX_POLICY_LIST) {
    throw new InvalidInputError(
      field,
      `${value.length} entries`,
      `Invalid \`${field}\`: ${value.length} entries, at most ${MAX_POLICY_LIST} are accepted; use wider networks.`,
    );
  }
  return value;
}

function uniqueCidrs(values: readonly unknown[], what: string): Cidr[] {
  const seen = new Map<string, Cidr>();
  for (const value of values) {
    const cidr = parseCidr(value, what);
    seen.set(cidr.text, cidr);
  }
  return [...seen.values()];
}

/**
 * Validate a policy and bring it into one canonical form.
 *
 * @throws {InvalidInputError} for any refused value, naming it and the accepted forms.
 * @throws {TypeError} when a field has the wrong type altogether.
 */
export function normalizePolicy(input: IsolationPolicy): NormalizedPolicy {
  // Unknown keys are refused: a typo such as `denyall` would otherwise drop deny-all
  // silently and leave the agent less isolated than its author wrote.
  const policy = strictObject<IsolationPolicy>(input, POLICY_KEYS, 'isolation policy');
  const given = (['iifname', 'saddr', 'skuid'] as const).filter((k) => policy[k] !== undefined);
  if (given.length !== 1) {
    throw new InvalidInputError(
      'agent identity',
      given,
      `Invalid agent identity: expected exactly one of \`iifname\`, \`saddr\` or \`skuid\`, got ${given.length === 0 ? 'none' : given.map((k) => `\`${k}\``).join(' and ')}.`,
    );
  }
  let identity: NormalizedPolicy['identity'];
  if (policy.iifname !== undefined) {
    identity = { kind: 'iifname', value: validateInterfaceName(policy.iifname) };
  } else if (policy.saddr !== undefined) {
    identity = { kind: 'saddr', value: parseAddress(policy.saddr, 'agent source address') };
  } else {
    identity = { kind: 'skuid', value: validateUid(policy.skuid) };
  }

  const gatewayInput =
    policy.gateway === undefined
      ? []
      : typeof policy.gateway === 'string'
        ? [policy.gateway]
        : list(policy.gateway, 'gateway');
  const gateway: Cidr[] = [];
  for (const value of gatewayInput) {
    const address = parseAddress(value, 'gateway address');
    if (!gateway.some((g) => g.text === address.text)) gateway.push(address);
  }

  const tcp = new Set<number>();
  const udp = new Set<number>();
  for (const entry of list(policy.hostAccess, 'hostAccess') as HostPort[]) {
    if (typeof entry !== 'number') {
      strictObject(entry, ['port', 'protocol'], 'hostAccess entry');
    }
    const port = typeof entry === 'number' ? entry : entry.port;
    const protocol = typeof entry === 'number' ? 'tcp' : (entry.protocol ?? 'tcp');
    if (protocol !== 'tcp' && protocol !== 'udp') {
      throw new InvalidInputError(
        'host access protocol',
        protocol,
        `Invalid host access protocol ${JSON.stringify(protocol)}: expected \`tcp\` or \`udp\`.`,
      );
    }
    (protocol === 'tcp' ? tcp : udp).add(validatePort(port));
  }
  if (identity.kind === 'skuid' && tcp.size + udp.size > 0) {
    throw new InvalidInputError(
      'hostAccess',
      policy.hostAccess,
      'Invalid hostAccess for an `skuid` agent: a process on the host reaches the host over loopback, which these rules do not filter; remove `hostAccess` or give the agent its own network (iifname or saddr).',
    );
  }
  if (policy.denyAll !== undefined && typeof policy.denyAll !== 'boolean') {
    throw new TypeError(`Expected \`denyAll\` to be a boolean, got \`${typeof policy.denyAll}\``);
  }

  const byNumber = (a: number, b: number) => a - b;
  return {
    identity,
    gateway,
    allowlist: uniqueCidrs(list(policy.allowlist, 'allowlist'), 'allowlist entry'),
    metadata: uniqueCidrs(
      policy.metadata === undefined
        ? DEFAULT_METADATA_ADDRESSES
        : list(policy.metadata, 'metadata'),
      'metadata address',
    ),
    blocked: uniqueCidrs(
      policy.blocked === undefined ? DEFAULT_BLOCKED_RANGES : list(policy.blocked, 'blocked'),
      'blocked range',
    ),
    denyAll: policy.denyAll ?? false,
    hostAccess: { tcp: [...tcp].sort(byNumber), udp: [...udp].sort(byNumber) },
  };
}
