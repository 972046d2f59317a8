// The closed set of objects an isolation plan is made of. The builder produces
// these, the renderer is the only code that turns them into nft text.

/** Address family of an address match inside the `inet` table. */
export type AddrFamily = 'ip' | 'ip6';

/** A key a verdict map dispatches on. */
export type DispatchKey = 'iifname' | 'ip saddr' | 'ip6 saddr' | 'meta skuid';

/** ICMPv6 types the host input chain lets through (neighbour discovery). */
export type Icmpv6Type = 'nd-neighbor-solicit' | 'nd-neighbor-advert' | 'nd-router-solicit';

/** One match expression of a rule. */
export type NftExpr =
  | { readonly type: 'iifname'; readonly name: string }
  | { readonly type: 'oifname'; readonly name: string }
  | { readonly type: 'saddr'; readonly family: AddrFamily; readonly addrs: readonly string[] }
  | { readonly type: 'daddr'; readonly family: AddrFamily; readonly addrs: readonly string[] }
  | { readonly type: 'skuid'; readonly uid: number }
  | { readonly type: 'ctState'; readonly states: readonly ('established' | 'related')[] }
  | { readonly type: 'dport'; readonly protocol: 'tcp' | 'udp'; readonly ports: readonly number[] }
  | { readonly type: 'icmpv6Type'; readonly types: readonly Icmpv6Type[] }
  | { readonly type: 'vmap'; readonly key: DispatchKey; readonly map: string };

/** A rule: matches, then an optional verdict, then an optional comment. */
export interface NftRule {
  /** Every expression must match for the verdict to apply. */
  readonly exprs: readonly NftExpr[];
  /** What happens to a matching packet; absent for a dispatch (`vmap`) rule. */
  readonly verdict?: 'accept' | 'drop';
  /** Comment stored with the rule; identifies the agent that owns it. */
  readonly comment?: string;
}

/** A key of a verdict-map element. */
export type NftElementKey =
  | { readonly kind: 'ifname'; readonly value: string }
  | { readonly kind: 'addr'; readonly value: string }
  | { readonly kind: 'uid'; readonly value: number };

/** Hooks of the base chains. */
export type NftHook = 'forward' | 'input' | 'output';

/** One line of an `nft -f` script. */
export type NftCommand =
  | { readonly op: 'add table' | 'create table' }
  | {
      readonly op: 'add chain' | 'create chain';
      readonly chain: string;
      /** Set for a base chain: `type filter hook <hook> priority 0; policy accept;`. */
      readonly hook?: NftHook;
    }
  | { readonly op: 'flush chain' | 'delete chain'; readonly chain: string }
  | { readonly op: 'add map' | 'create map'; readonly map: string; readonly key: DispatchKey }
  | { readonly op: 'add rule' | 'insert rule'; readonly chain: string; readonly rule: NftRule }
  | { readonly op: 'delete rule'; readonly chain: string; readonly handle: number }
  | {
      readonly op: 'add element';
      readonly map: string;
      readonly key: NftElementKey;
      /** The chain the element jumps to. */
      readonly target: string;
    }
  | { readonly op: 'delete element'; readonly map: string; readonly key: NftElementKey };

/** A transaction: commands against one `inet` table, applied together or not at all. */
export interface NftPlan {
  /** Always `inet`: one table covers IPv4 and IPv6. */
  readonly family: 'inet';
  /** Table name. */
  readonly table: string;
  /** Commands in order. */
  readonly commands: readonly NftCommand[];
}
