/**
 * `scaler-primitives/testing`: a kit for testing the programs that embed this
 * library. Virtual time (`TestClock`), a scriptable `FakeBackend`, an in-memory
 * `MemoryPoolLedger`, a whole fleet in one call (`createTestFleet` with
 * `checkInvariants`), and conformance suites (`poolLedgerConformance`,
 * `scalerBackendConformance`, `stateStoreConformance`) that prove a ledger or backend of your own keeps
 * this library's contract. It imports no test framework: suites are arrays of
 * `{ name, run }` that vitest, jest or `node:test` run alike.
 *
 * Nothing else in the package imports this module, and the root
 * `scaler-primitives` entry does not re-export it.
 *
 * @packageDocumentation
 */

export { type MakeBackend, scalerBackendConformance } from './conformance/backend.js';
export {
  type ConformanceCheck,
  ConformanceError,
  ConformanceSkipped,
} from './conformance/check.js';
export { type MakeLedger, poolLedgerConformance } from './conformance/ledger/suite.js';
export { type MakeStateStore, stateStoreConformance } from './conformance/state-store.js';
export {
  FakeBackend,
  type FakeBackendOptions,
  type FakeCall,
  type FakeScript,
} from './fake-backend/backend.js';
export {
  createTestFleet,
  type FleetBackendOptions,
  FleetInvariantError,
  type TestFleet,
  type TestFleetOptions,
} from './fleet.js';
export {
  MemoryPoolLedger,
  type MemoryPoolLedgerOptions,
  MemoryPoolStore,
} from './memory-ledger/index.js';
export { TestClock } from './test-clock/clock.js';
