/**
 * Pure decisions over one pool document, shared by every ledger backend: parse and
 * validate, compare caps, decide which rows are stale from injected facts, check a
 * request against the cap, add and remove rows, serialize. No I/O, no clock.
 *
 * The door of the pool document; each concern is a room of its own:
 * `pool-name.ts` (the name rule), `document-codec.ts` (version, schema, parse,
 * validate, serialize), `pool-cap.ts` (cap checks and comparison), `fit.ts` and
 * `extended.ts` (cap math), `row-verdict.ts` (stale rows), `rows.ts` (row edits).
 */

export {
  type DocumentSource,
  emptyDocument,
  LEDGER_VERSION,
  parseDocument,
  serializeDocument,
  validateDocument,
} from './document-codec.js';
export { assertKiciCompatibleCap } from './extended.js';
export { checkFit, sumRows } from './fit.js';
export { assertCap, capsEqual, describeCap, normalizeCap } from './pool-cap.js';
export { validatePoolName } from './pool-name.js';
export {
  type LeaseState,
  type LivenessFacts,
  type ProcessState,
  partitionBy,
  partitionRows,
  type RowPartition,
  type RowVerdict,
  rowVerdict,
  StaleReason,
  type StaleRow,
} from './row-verdict.js';
export {
  addRow,
  keepRows,
  type RemoveResult,
  type RowMatch,
  removeRows,
} from './rows.js';
