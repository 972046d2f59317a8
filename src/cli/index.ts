#!/usr/bin/env node
/**
 * `scaler-primitives`: the operator CLI. See `docs/cli.md`.
 */
import { main } from './main.js';

void main(process.argv.slice(2), {
  out: (text) => process.stdout.write(text),
  err: (text) => process.stderr.write(text),
  env: process.env,
}).then((code) => {
  process.exitCode = code;
});
