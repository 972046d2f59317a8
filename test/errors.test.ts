import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import * as root from 'scaler-primitives';
import * as errors from 'scaler-primitives/errors';
import { describe, expect, it } from 'vitest';
import { ErrorCode, isScalerError, ScalerError } from '../src/errors/base.js';
import { isLedgerBusyError, isLedgerError, LedgerBusyError } from '../src/errors/ledger.js';
import { isResourceParseError, ResourceParseError } from '../src/errors/resources.js';

describe('ScalerError', () => {
  it('carries a code, a name, a message and a cause', () => {
    const cause = new Error('root cause');
    const error = new ScalerError(ErrorCode.LEDGER_BUSY, 'pool p is busy', { cause });
    expect(error).toBeInstanceOf(Error);
    expect(error.code).toBe('ERR_LEDGER_BUSY');
    expect(error.name).toBe('ScalerError');
    expect(error.message).toBe('pool p is busy');
    expect(error.cause).toBe(cause);
    expect('cause' in new ScalerError(ErrorCode.BACKEND, 'x')).toBe(false);
  });

  it('subclasses set their own name and fields', () => {
    const error = new LedgerBusyError('p', 1234, 'busy');
    expect(error.name).toBe('LedgerBusyError');
    expect(error.pool).toBe('p');
    expect(error.lockAgeMs).toBe(1234);
    expect(error.stack).toContain('LedgerBusyError');
  });

  it('predicates recognise by brand and code, not by class identity', () => {
    const error = new ResourceParseError('cpu', 'x', 'bad');
    expect(isScalerError(error)).toBe(true);
    expect(isResourceParseError(error)).toBe(true);
    expect(isLedgerError(error)).toBe(false);
    expect(isLedgerBusyError(new LedgerBusyError('p', undefined, 'busy'))).toBe(true);
    expect(isLedgerError(new LedgerBusyError('p', undefined, 'busy'))).toBe(true);
    // A look-alike without the brand (e.g. a plain object with a code) is not ours.
    const lookalike = Object.assign(new Error('x'), { code: 'ERR_RESOURCE_PARSE' });
    expect(isScalerError(lookalike)).toBe(false);
    expect(isResourceParseError(lookalike)).toBe(false);
    for (const value of [null, undefined, 'ERR_LEDGER_BUSY', 42, {}]) {
      expect(isScalerError(value)).toBe(false);
    }
  });

  it('isScalerError(error, code) accepts only that code, or one of a list', () => {
    const busy = new LedgerBusyError('p', 5, 'busy');
    expect(isScalerError(busy, ErrorCode.LEDGER_BUSY)).toBe(true);
    expect(isScalerError(busy, ErrorCode.LEDGER_CORRUPT)).toBe(false);
    expect(isScalerError(busy, [ErrorCode.LEDGER_CORRUPT, ErrorCode.LEDGER_BUSY])).toBe(true);
    expect(isScalerError(busy, [])).toBe(false);
    const lookalike = Object.assign(new Error('x'), { code: 'ERR_LEDGER_BUSY' });
    expect(isScalerError(lookalike, ErrorCode.LEDGER_BUSY)).toBe(false);
    const error: unknown = busy;
    // Narrowed to the class raised with the code: its fields type-check.
    if (isScalerError(error, ErrorCode.LEDGER_BUSY)) expect(error.lockAgeMs).toBe(5);
    else expect.unreachable();
  });

  it('recognises an error of another copy of the library (same brand, other class)', () => {
    // What the CJS build's class looks like from the ESM build: another constructor,
    // the same registered symbol.
    class OtherCopyError extends Error {
      readonly code = 'ERR_NFT_PERMISSION';
      constructor() {
        super('nft: Operation not permitted');
        Object.defineProperty(this, Symbol.for('scaler-primitives.ScalerError'), { value: true });
      }
    }
    const error = new OtherCopyError();
    expect(error).not.toBeInstanceOf(ScalerError);
    expect(isScalerError(error)).toBe(true);
    expect(isScalerError(error, ErrorCode.NFT_PERMISSION)).toBe(true);
    expect(isScalerError(error, ErrorCode.NFT_COMMAND)).toBe(false);
  });

  it('every code is a distinct ERR_ string', () => {
    const codes = Object.values(ErrorCode);
    expect(new Set(codes).size).toBe(codes.length);
    for (const code of codes) expect(code).toMatch(/^ERR_[A-Z_]+$/);
  });
});

describe('scaler-primitives/errors', () => {
  it('exports the codes, the predicate and every error class, the same objects as the root', () => {
    expect(errors.ErrorCode).toBe(root.ErrorCode);
    expect(errors.isScalerError).toBe(root.isScalerError);
    expect(errors.ScalerError).toBe(root.ScalerError);
    const classes = Object.entries(errors).filter(([name]) => /^[A-Z]\w*Error$/.test(name));
    expect(classes.length).toBeGreaterThanOrEqual(20);
    for (const [name, value] of classes) {
      expect(typeof value, name).toBe('function');
      if (value !== ScalerError) {
        expect((value as { prototype: unknown }).prototype, name).toBeInstanceOf(ScalerError);
      }
    }
    // Every error class the root exports comes from this subpath.
    const byName = new Map<string, unknown>(classes);
    for (const [name, value] of Object.entries(root)) {
      if (/^[A-Z]\w*Error$/.test(name)) expect(byName.get(name), name).toBe(value);
    }
  });

  it('loads nothing but its own files (a user of ./ledger alone need not load the facade)', () => {
    const dir = join(import.meta.dirname, '..', 'src', 'errors');
    for (const file of readdirSync(dir).filter((name) => name.endsWith('.ts'))) {
      const text = readFileSync(join(dir, file), 'utf8');
      for (const [, spec] of text.matchAll(/^(?:import|export)[^;]*?from '([^']+)'/gm)) {
        expect(spec, `src/errors/${file}`).toMatch(/^\.\/[a-z-]+\.js$/);
      }
    }
  });
});
