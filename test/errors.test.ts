import { describe, expect, it } from 'vitest';
import {
  ErrorCode,
  isLedgerBusyError,
  isLedgerError,
  isResourceParseError,
  isScalerError,
  LedgerBusyError,
  ResourceParseError,
  ScalerError,
} from '../src/errors.js';

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

  it('every code is a distinct ERR_ string', () => {
    const codes = Object.values(ErrorCode);
    expect(new Set(codes).size).toBe(codes.length);
    for (const code of codes) expect(code).toMatch(/^ERR_[A-Z_]+$/);
  });
});
