/**
 * scaler-primitives: the public surface of every module except the NATS adapters
 * (import those from `scaler-primitives/ledger/nats` and `scaler-primitives/agent-caps/nats`).
 *
 * @packageDocumentation
 */

export * from './agent-caps/index.js';
export * from './caps/index.js';
export { type Clock, type ClockTimer, systemClock } from './clock.js';
export * from './errors.js';
export * from './ledger/index.js';
export * from './manager/index.js';
export * from './nftables/index.js';
export * from './resources/index.js';
