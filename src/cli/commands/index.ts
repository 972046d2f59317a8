import type { CliCommand } from '../registry.js';
import { ledgerCommand } from './ledger.js';

/** Every command of the CLI, in help order. Later modules add theirs here. */
export const commands: CliCommand[] = [ledgerCommand];
