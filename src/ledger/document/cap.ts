/**
 * A pool's cap: validate the registered cap, compare caps as they are enforced,
 * fail on a stored cap that differs, describe a cap for messages. The rules of
 * each field are in the one table of cap fields (`resources/cap-fields.ts`).
 */

import { LedgerCapMismatchError } from '../../errors/index.js';
import { capsEqual, describeCap } from '../../resources/cap-fields.js';
import type { ResourceCap } from '../../resources/types.js';
import type { LedgerDocument } from '../types.js';
import type { DocumentSource } from './codec.js';

export {
  CAP_FIELD_NAMES as CAP_KEYS,
  capsEqual,
  describeCap,
  normalizeCap,
} from '../../resources/cap-fields.js';

/**
 * Fail unless the stored cap equals the registered one.
 *
 * @throws LedgerCapMismatchError naming the location and both caps.
 */
export function assertCap(doc: LedgerDocument, registered: ResourceCap, source: DocumentSource) {
  if (capsEqual(doc.cap, registered)) return;
  throw new LedgerCapMismatchError(
    source.pool,
    doc.cap,
    registered,
    `Pool ${JSON.stringify(source.pool)} in ${source.location} has cap ${describeCap(doc.cap)}, but this process registered ${describeCap(registered)}. Every writer of a pool must register the same cap; fix the configuration, or clear the pool deliberately if the cap really changed.`,
  );
}
