import { isIP } from 'node:net';
import { InvalidInputError } from '../errors/index.js';
import { showValue } from '../internal/strict-keys.js';

// Every value that ends up in nft script text passes through one of these
// functions first. Each returns the value in the exact form the renderer prints
// and the parsers compare against, so "equal" always means "byte-equal".

const AGENT_ID = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;
// Linux allows almost any byte in an interface name; we also keep out what is
// special inside an nft quoted string (`"`, `\`) and `*`, which nft reads as a
// prefix wildcard (`iifname "veth*"` matches every veth).
const IFNAME = /^[A-Za-z0-9_.@+-]{1,15}$/;
const TABLE = /^[A-Za-z][A-Za-z0-9_]{0,31}$/;
const NETNS = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$/;

/** A value as a message shows it: JSON-quoted, control characters escaped, bounded. */
export const show = showValue;

function refuse(what: string, value: unknown, accepted: string): never {
  throw new InvalidInputError(what, value, `Invalid ${what} ${show(value)}: expected ${accepted}.`);
}

/**
 * An agent id, used in rule comments and per-agent chain names.
 * Accepted: 1-64 characters of `A-Z a-z 0-9 _ . -`, starting with a letter or digit.
 *
 * @example
 * ```ts
 * import { validateAgentId } from 'scaler-primitives/nftables';
 *
 * validateAgentId('ci-42'); // 'ci-42'
 * validateAgentId('ci 42; flush ruleset'); // throws InvalidInputError
 * ```
 */
export function validateAgentId(value: unknown): string {
  if (typeof value !== 'string' || !AGENT_ID.test(value)) {
    refuse(
      'agent id',
      value,
      '1-64 characters of letters, digits, `_`, `.` and `-`, starting with a letter or digit',
    );
  }
  return value;
}

/**
 * A Linux interface name that is also safe inside an nft quoted string.
 *
 * @example
 * ```ts
 * import { validateInterfaceName } from 'scaler-primitives/nftables';
 *
 * validateInterfaceName('tap-ci-42'); // 'tap-ci-42'
 * validateInterfaceName('veth*'); // throws InvalidInputError: nft would read it as a prefix wildcard
 * ```
 */
export function validateInterfaceName(value: unknown): string {
  if (
    typeof value !== 'string' ||
    !IFNAME.test(value) ||
    value === '.' ||
    value === '..' ||
    Buffer.byteLength(value) > 15
  ) {
    refuse(
      'interface name',
      value,
      'a Linux interface name of 1-15 characters from letters, digits, `_ . @ + -`, not `.` or `..` (no `/`, `:`, whitespace, quotes or `*`)',
    );
  }
  return value;
}

/** An nft table name: a letter then up to 31 letters, digits or `_`. */
export function validateTableName(value: unknown): string {
  if (typeof value !== 'string' || !TABLE.test(value)) {
    refuse('table name', value, 'a letter followed by up to 31 letters, digits or `_`');
  }
  return value;
}

/** A network namespace name as given to `ip netns exec`. */
export function validateNetnsName(value: unknown): string {
  if (typeof value !== 'string' || !NETNS.test(value)) {
    refuse(
      'network namespace name',
      value,
      '1-64 characters of letters, digits, `_`, `.` and `-`, not starting with `-` or `.`',
    );
  }
  return value;
}

/** A TCP or UDP port. */
export function validatePort(value: unknown): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > 65535) {
    refuse('port', value, 'an integer from 1 to 65535');
  }
  return value;
}

/** A numeric user id. */
export function validateUid(value: unknown): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 0 || value > 4294967294) {
    refuse('uid', value, 'an integer from 0 to 4294967294');
  }
  return value;
}

/**
 * A parsed, normalized address or network.
 */
export interface Cidr {
  /** 4 or 6. */
  readonly family: 4 | 6;
  /** The network address in canonical form (IPv6 per RFC 5952: lower case, `::` compressed). */
  readonly address: string;
  /** Prefix length; 32 or 128 for a single address. */
  readonly prefix: number;
  /** What nft prints: `address` for a single address, else `address/prefix`. */
  readonly text: string;
}

const MAPPED_PREFIX = 0xffffn << 32n;

function v4ToInt(address: string): bigint {
  return address.split('.').reduce((acc, part) => (acc << 8n) | BigInt(Number(part)), 0n);
}

function intToV4(value: bigint): string {
  return [24n, 16n, 8n, 0n].map((shift) => String((value >> shift) & 0xffn)).join('.');
}

function v6ToInt(canonical: string): bigint {
  const [head = '', tail] = canonical.split('::');
  const left = head === '' ? [] : head.split(':');
  const right = tail === undefined || tail === '' ? [] : tail.split(':');
  const fill = tail === undefined ? [] : new Array(8 - left.length - right.length).fill('0');
  return [...left, ...fill, ...right].reduce(
    (acc, group) => (acc << 16n) | BigInt(`0x${group}`),
    0n,
  );
}

function intToV6(value: bigint): string {
  const groups: string[] = [];
  for (let shift = 112n; shift >= 0n; shift -= 16n) {
    groups.push(((value >> shift) & 0xffffn).toString(16));
  }
  // The WHATWG URL serializer applies RFC 5952 (the same form nft prints).
  return new URL(`http://[${groups.join(':')}]`).hostname.slice(1, -1);
}

function canonicalV6(address: string): string {
  return new URL(`http://[${address}]`).hostname.slice(1, -1);
}

const ADDRESS_FORMS =
  'an IPv4 address (10.0.0.1) or an IPv6 address (fd00::1) without zone index; write IPv4-mapped IPv6 addresses (::ffff:a.b.c.d) in their IPv4 form';
const CIDR_FORMS = `${ADDRESS_FORMS.replace('an IPv4 address', 'an IPv4 address or network (10.0.0.1, 10.0.0.0/8)').replace('an IPv6 address (fd00::1)', 'an IPv6 address or network (fd00::1, fc00::/7)')}, with no host bits set after the prefix`;

/** The longest address or CIDR text accepted (a full IPv6 address with `/128` is 43). */
export const MAX_CIDR_LENGTH = 64;

function parse(value: unknown, what: string, allowPrefix: boolean): Cidr {
  const forms = allowPrefix ? CIDR_FORMS : ADDRESS_FORMS;
  if (typeof value !== 'string' || value.length > MAX_CIDR_LENGTH) refuse(what, value, forms);
  const slash = value.indexOf('/');
  const address = slash === -1 ? value : value.slice(0, slash);
  const prefixText = slash === -1 ? undefined : value.slice(slash + 1);
  if (prefixText !== undefined && !allowPrefix) refuse(what, value, forms);
  const family = isIP(address);
  if (family === 0 || address.includes('%')) refuse(what, value, forms);
  const bits = family === 4 ? 32 : 128;
  let prefix = bits;
  if (prefixText !== undefined) {
    if (!/^(0|[1-9][0-9]{0,2})$/.test(prefixText) || Number(prefixText) > bits) {
      refuse(what, value, forms);
    }
    prefix = Number(prefixText);
  }
  const int = family === 4 ? v4ToInt(address) : v6ToInt(canonicalV6(address));
  if (family === 6 && prefix >= 96 && int >> 32n === MAPPED_PREFIX >> 32n) {
    // An ip6 rule on ::ffff:a.b.c.d never sees IPv4 traffic: refuse rather than emit a no-op.
    refuse(what, value, forms);
  }
  const hostMask = (1n << BigInt(bits - prefix)) - 1n;
  if ((int & hostMask) !== 0n) {
    const network = int & ~hostMask;
    const suggestion = `${family === 4 ? intToV4(network) : intToV6(network)}/${prefix}`;
    throw new InvalidInputError(
      what,
      value,
      `Invalid ${what} ${show(value)}: host bits are set after the /${prefix} prefix; write the network address (${suggestion}) or a single address without a prefix.`,
    );
  }
  const normalized = family === 4 ? intToV4(int) : intToV6(int);
  return {
    family: family as 4 | 6,
    address: normalized,
    prefix,
    text: prefix === bits ? normalized : `${normalized}/${prefix}`,
  };
}

/**
 * A single IPv4 or IPv6 address, normalized.
 */
export function parseAddress(value: unknown, what = 'address'): Cidr {
  return parse(value, what, false);
}

/**
 * An IPv4 or IPv6 address or network (CIDR), normalized; host bits must be zero.
 */
export function parseCidr(value: unknown, what = 'CIDR'): Cidr {
  return parse(value, what, true);
}

/** The longest rule comment nft stores (`comment too long, 128 characters maximum allowed`). */
export const MAX_COMMENT_LENGTH = 128;

// What may appear between the double quotes of an nft comment.
const COMMENT = /^[A-Za-z0-9_.@+=:/ -]*$/;

/** A rule comment: at most 128 characters of letters, digits, space and `_ . @ + = : / -`. */
export function validateComment(value: unknown): string {
  if (typeof value !== 'string' || value.length > MAX_COMMENT_LENGTH || !COMMENT.test(value)) {
    refuse(
      'rule comment',
      value,
      `at most ${MAX_COMMENT_LENGTH} characters of letters, digits, spaces and \`_ . @ + = : / -\``,
    );
  }
  return value;
}

const AGENT_CHAIN = /^agent-[A-Za-z0-9][A-Za-z0-9_.-]{0,63}-(fwd|in|out)$/;

/**
 * A chain name the plans of this library use: a base chain (`forward`, `input`,
 * `output`) or an agent's chain `agent-<agent id>-<fwd|in|out>`.
 */
export function validateChainName(value: unknown): string {
  if (
    value !== 'forward' &&
    value !== 'input' &&
    value !== 'output' &&
    (typeof value !== 'string' || !AGENT_CHAIN.test(value))
  ) {
    refuse(
      'chain name',
      value,
      '`forward`, `input`, `output` or an agent chain `agent-<agent id>-<fwd|in|out>`',
    );
  }
  return value as string;
}

/** The default table name (a letter then letters and `_`, which nft reads as one identifier). */
export const DEFAULT_TABLE = 'scaler_primitives';

/** The table family used when none is given. */
export const DEFAULT_FAMILY = 'inet';

/** A table family: `inet` or `ip`. */
export function validateFamily(value: unknown): 'inet' | 'ip' {
  if (value !== 'inet' && value !== 'ip') {
    refuse(
      'table family',
      value,
      "`inet` (IPv4 and IPv6 in one table) or `ip` (IPv4 only, as kici's `ip kici`)",
    );
  }
  return value;
}

/** A layout name: `vmap` or `rules`. */
export function validateLayout(value: unknown): 'vmap' | 'rules' {
  if (value !== 'vmap' && value !== 'rules') refuse('layout', value, '`vmap` or `rules`');
  return value;
}
