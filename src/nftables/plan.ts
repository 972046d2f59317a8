// The closed set of objects an isolation plan is made of. The builder produces
// these, the renderer is the only code that turns them into nft text.

/**
 * One match expression of a rule.
 */
export type NftExpr =
  | {
      /** Match the input interface name. */
      readonly type: 'iifname';
      /** The interface name, matched exactly. */
      readonly name: string;
    }
  | {
      /** Match the output interface name. */
      readonly type: 'oifname';
      /** The interface name, matched exactly. */
      readonly name: string;
    }
  | {
      /** Match the source address. */
      readonly type: 'saddr';
      /** `ip` or `ip6` (`ip6` only in an `inet` table). */
      readonly family: 'ip' | 'ip6';
      /** Normalized addresses or CIDRs; several make an anonymous set. */
      readonly addrs: readonly string[];
    }
  | {
      /** Match the destination address. */
      readonly type: 'daddr';
      /** `ip` or `ip6` (`ip6` only in an `inet` table). */
      readonly family: 'ip' | 'ip6';
      /** Normalized addresses or CIDRs; several make an anonymous set. */
      readonly addrs: readonly string[];
    }
  | {
      /** Match the uid of the sending local process (output hook). */
      readonly type: 'skuid';
      /** The uid. */
      readonly uid: number;
    }
  | {
      /** Match conntrack state. */
      readonly type: 'ctState';
      /** States that match. */
      readonly states: readonly ('established' | 'related')[];
    }
  | {
      /** Match a destination port. */
      readonly type: 'dport';
      /** Transport protocol. */
      readonly protocol: 'tcp' | 'udp';
      /** Ports; several make an anonymous set. */
      readonly ports: readonly number[];
    }
  | {
      /** Match ICMPv6 types. */
      readonly type: 'icmpv6Type';
      /** The types that match: those of neighbour discovery the host input chain lets through. */
      readonly types: readonly (
        | 'nd-neighbor-solicit'
        | 'nd-neighbor-advert'
        | 'nd-router-solicit'
      )[];
    }
  | {
      /** Dispatch through a verdict map. */
      readonly type: 'vmap';
      /** What the map is keyed by. */
      readonly key: 'iifname' | 'ip saddr' | 'ip6 saddr' | 'meta skuid';
      /** The map's name. */
      readonly map: string;
    };

/**
 * A rule: matches, then an optional verdict, then an optional comment.
 */
export interface NftRule {
  /** Every expression must match for the verdict to apply. */
  readonly exprs: readonly NftExpr[];
  /** What happens to a matching packet; absent for a dispatch (`vmap`) rule. */
  readonly verdict?: 'accept' | 'drop';
  /** Comment stored with the rule; identifies the agent that owns it. */
  readonly comment?: string;
}

/**
 * One line of an `nft -f` script.
 */
export type NftCommand =
  | {
      /** Create the table (`create` fails if it exists). */
      readonly op: 'add table' | 'create table';
    }
  | {
      /** Create a chain (`create` fails if it exists). */
      readonly op: 'add chain' | 'create chain';
      /** The chain's name. */
      readonly chain: string;
      /** Set for a base chain: `type filter hook <hook> priority 0; policy accept;`. */
      readonly hook?: 'forward' | 'input' | 'output';
    }
  | {
      /** Empty or delete a chain. */
      readonly op: 'flush chain' | 'delete chain';
      /** The chain's name. */
      readonly chain: string;
    }
  | {
      /** Create a verdict map (`create` fails if it exists). */
      readonly op: 'add map' | 'create map';
      /** The map's name. */
      readonly map: string;
      /** What the map is keyed by (as the `vmap` expression that dispatches through it). */
      readonly key: Extract<NftExpr, { type: 'vmap' }>['key'];
    }
  | {
      /** Append (`add`) or prepend (`insert`) a rule. */
      readonly op: 'add rule' | 'insert rule';
      /** The chain it goes in. */
      readonly chain: string;
      /** The rule. */
      readonly rule: NftRule;
    }
  | {
      /** Delete one rule by handle. */
      readonly op: 'delete rule';
      /** The chain holding it. */
      readonly chain: string;
      /** Its handle, from `nft -a` or `nft -j`. */
      readonly handle: number;
    }
  | {
      /** Add a verdict-map element that jumps to an agent's chain. */
      readonly op: 'add element';
      /** The map. */
      readonly map: string;
      /** The element's key: an interface name, a normalized address or a uid. */
      readonly key:
        | {
            /** An interface name key. */
            readonly kind: 'ifname';
            /** The interface name. */
            readonly value: string;
          }
        | {
            /** An address key. */
            readonly kind: 'addr';
            /** The normalized address. */
            readonly value: string;
          }
        | {
            /** A uid key. */
            readonly kind: 'uid';
            /** The uid. */
            readonly value: number;
          };
      /** The chain the element jumps to. */
      readonly target: string;
    }
  | {
      /** Delete a verdict-map element. */
      readonly op: 'delete element';
      /** The map. */
      readonly map: string;
      /** The element's key (as in `add element`). */
      readonly key: Extract<NftCommand, { op: 'add element' }>['key'];
    };

/**
 * A transaction: commands against one table, applied together or not at all.
 */
export interface NftPlan {
  /**
   * `inet` (one table for IPv4 and IPv6: the default) or `ip` (IPv4 only, as the kici
   * orchestrator's `ip kici` table). An `ip` table never sees IPv6 packets, so it holds no
   * `ip6` match, map or key, and does not filter IPv6 at all.
   */
  readonly family: 'inet' | 'ip';
  /** Table name. */
  readonly table: string;
  /** Commands in order. */
  readonly commands: readonly NftCommand[];
}

// The names the package's own code uses for the parts of the public types above (each
// declared once, there).

/** Family of the table a plan writes. */
export type TableFamily = NftPlan['family'];
/** Address family of an address match. */
export type AddrFamily = Extract<NftExpr, { type: 'saddr' }>['family'];
/** A key a verdict map dispatches on. */
export type DispatchKey = Extract<NftExpr, { type: 'vmap' }>['key'];
/** ICMPv6 types the host input chain lets through (neighbour discovery). */
export type Icmpv6Type = Extract<NftExpr, { type: 'icmpv6Type' }>['types'][number];
/** A key of a verdict-map element. */
export type NftElementKey = Extract<NftCommand, { op: 'add element' }>['key'];
/** Hooks of the base chains. */
export type NftHook = NonNullable<
  Extract<NftCommand, { op: 'add chain' | 'create chain' }>['hook']
>;
