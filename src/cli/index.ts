#!/usr/bin/env node
/**
 * `scaler-primitives`: the operator CLI. See `docs/cli.md`.
 */
import { main } from './main.js';

void main(process.argv.slice(2), {
  out: (text) => process.stdout.write(text),
  err: (text) => process.stderr.write(text),
  env: process.env,
  isTTY: process.stdout.isTTY === true,
  // Cursor home, clear screen: the only control sequence the CLI writes itself.
  redraw: (text) => process.stdout.write(`\x1b[H\x1b[2J${text}`),
}).then((code) => {
  process.exitCode = code;
});
