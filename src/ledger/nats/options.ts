/**
 * Strict option objects for the NATS pool ledger: an unknown key (a typo such
 * as `leasMs`) is an error naming the key, the nearest accepted key and every
 * accepted key, never silently ignored.
 */
import { InvalidInputError } from '../../errors/index.js';
import { nearest } from '../../internal/strict-keys.js';
import { withTestHooks } from '../../internal/test-hooks.js';
import { LEDGER_TELEMETRY_KEYS } from '../telemetry.js';
import type { LedgerDocument } from '../types.js';
import type { NatsPoolLedgerOptions } from './types.js';

/** Every key `NatsPoolLedger.connect` accepts. */
export const NATS_POOL_LEDGER_OPTION_KEYS = [
  'nc',
  'servers',
  'bucket',
  'instanceId',
  'leaseMs',
  'leaseMarginMs',
  'replicas',
  'timeoutMs',
  'bootId',
  'clock',
  'combine',
  'serverVersionPolicy',
  ...LEDGER_TELEMETRY_KEYS,
] as const;

/**
 * What tests can hook into (passed with `withTestHooks` from
 * src/internal/test-hooks.ts; not public API).
 */
export interface NatsPoolLedgerHooks {
  /** Called after each successful write of a pool document, with its revision. */
  afterCommit: (pool: string, revision: number, doc: LedgerDocument) => void;
  /** Called for each lost compare-and-set race on a pool document. */
  onConflict: (pool: string) => void;
  /** Called before calls on a pool are sent to another instance's combiner. */
  onForward: (pool: string, subject: string) => void;
  /** This host's monotonic clock, which times the lease. @default `performance.now` */
  monotonic: () => number;
}

/** Every key of the test hooks. */
export const NATS_POOL_LEDGER_HOOK_KEYS = [
  'afterCommit',
  'onConflict',
  'onForward',
  'monotonic',
] as const satisfies readonly (keyof NatsPoolLedgerHooks)[];

/**
 * Refuse an options object that is not a plain object or holds a key outside `accepted`.
 *
 * @param what - What the object is, for the message (`NatsPoolLedger options`).
 * @throws InvalidInputError naming the unknown key, the nearest accepted key and all of them.
 */
export function assertKnownKeys(what: string, value: unknown, accepted: readonly string[]): void {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new InvalidInputError(
      what,
      value,
      `Expected ${what} to be an object, got ${value === null ? 'null' : Array.isArray(value) ? 'an array' : typeof value}`,
    );
  }
  for (const key of Object.keys(value)) {
    if (accepted.includes(key)) continue;
    const near = nearest(key, accepted);
    throw new InvalidInputError(
      `${what} key`,
      key,
      `Unknown key ${JSON.stringify(key.slice(0, 64))} in ${what}${near ? ` (did you mean ${JSON.stringify(near)}?)` : ''}; accepted keys: ${accepted.join(', ')}`,
    );
  }
}

/**
 * `options` carrying test hooks (see src/internal/test-hooks.ts): for tests,
 * benches and their worker processes only.
 */
export function withNatsLedgerHooks(
  options: NatsPoolLedgerOptions,
  hooks: Partial<NatsPoolLedgerHooks>,
): NatsPoolLedgerOptions {
  return withTestHooks(options, hooks);
}
