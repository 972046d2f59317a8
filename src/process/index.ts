/**
 * `scaler-primitives/process`: a `ScalerBackend` that runs each agent as a
 * local process or any command (`docker run`, `ssh host ...`), in its own
 * process group, recorded on disk so a controller restart finds it again.
 *
 * @packageDocumentation
 */
export {
  type ProcessAgentExit,
  ProcessBackend,
  type ProcessBackendOptions,
} from './backend.js';
export type { ProcessCommand } from './command.js';
