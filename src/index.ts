/**
 * scaler-primitives: the facade. `ScalerManager` and what a host wires to it, the
 * file ledger, the cap tracker, CPU and memory quantities, the errors and the clock.
 * Every module has its own subpath with the rest of its surface
 * (`scaler-primitives/ledger`, `/nftables`, `/agent-caps`, `/fence`, ...).
 *
 * @packageDocumentation
 */

export { CapTracker } from './caps/index.js';
export { type Clock, type ClockTimer, systemClock } from './clock.js';
export * from './errors/index.js';
export { MachineLedger, type MachineLedgerOptions, type PoolLedger } from './ledger/index.js';
export * from './manager/index.js';
export {
  formatCpu,
  formatMemory,
  parseCpu,
  parseMemory,
  type ResourceCap,
  type ResourceRequest,
  type ResourceSpec,
  resolveResources,
  resourceCapSchema,
} from './resources/index.js';
