import type { CliCommand } from '../registry.js';
import { capsCommand } from './caps.js';
import { configCommand } from './config.js';
import { ledgerCommand } from './ledger.js';
import { nftCommand } from './nft.js';

/** Every command of the CLI, in help order. Later modules add theirs here. */
export const commands: CliCommand[] = [ledgerCommand, configCommand, nftCommand, capsCommand];
