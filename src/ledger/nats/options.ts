/**
 * Strict option objects for the NATS pool ledger: an unknown key (a typo such
 * as `leasMs`) is an error naming the key, the nearest accepted key and every
 * accepted key, never silently ignored.
 */
import { InvalidInputError } from '../../errors.js';
import { nearest } from '../../internal/strict-keys.js';

/** Every key `NatsPoolLedger.connect` accepts. */
export const NATS_POOL_LEDGER_OPTION_KEYS = [
  'nc',
  'servers',
  'bucket',
  'instanceId',
  'leaseMs',
  'replicas',
  'timeoutMs',
  'bootId',
  'clock',
  'combine',
  'hooks',
] as const;

/** Every key of the `hooks` option. */
export const NATS_POOL_LEDGER_HOOK_KEYS = ['afterCommit', 'onConflict', 'onForward'] as const;

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
