/**
 * The pool name rule: the one check a pool name passes before it becomes part of a
 * path (the file ledger) or a key (the NATS ledger).
 */

import { InvalidInputError } from '../../errors/index.js';

// No leading dot: `.<pool>.queue` and temp files are dot names, and a dot pool
// would be hidden from listings (and is not a valid NATS KV key).
const POOL_NAME = /^[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}$/;

/**
 * Check a pool name before it becomes part of a path or a key.
 *
 * @returns The name, unchanged.
 * @throws InvalidInputError when the name is empty, longer than 128 characters,
 *   starts with `.`, or holds a character outside `[A-Za-z0-9._-]`.
 * @throws TypeError when the name is not a string.
 */
export function validatePoolName(name: unknown): string {
  if (typeof name !== 'string') {
    throw new TypeError(`Expected \`pool\` to be a string, got \`${typeof name}\``);
  }
  if (!POOL_NAME.test(name) || name === '.' || name === '..') {
    throw new InvalidInputError(
      'pool name',
      name,
      `Invalid pool name ${JSON.stringify(name.length > 160 ? `${name.slice(0, 160)}...` : name)}: use 1-128 characters from A-Z, a-z, 0-9, '.', '_' and '-', not starting with '.'.`,
    );
  }
  return name;
}
