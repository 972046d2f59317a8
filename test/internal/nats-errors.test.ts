import { JetStreamApiError } from '@nats-io/jetstream';
import {
  NoRespondersError,
  PermissionViolationError,
  RequestError,
  TimeoutError,
} from '@nats-io/transport-node';
import { describe, expect, it } from 'vitest';
import { isNatsRequestError } from '../../src/errors/nats.js';
import {
  isJetStreamRevisionConflict,
  isNatsTimeout,
  isNoResponders,
  isStreamNotFound,
  jetStreamApiCode,
  toNatsRequestError,
} from '../../src/internal/nats-errors.js';

const apiError = (err_code: number, description = 'x') =>
  new JetStreamApiError({ code: 400, err_code, description });

describe('nats error recognition', () => {
  it.each([
    [10071, true],
    [10164, true],
    [10059, false],
    [10037, false],
  ])('code %i is a revision conflict: %s', (code, conflict) => {
    expect(isJetStreamRevisionConflict(apiError(code))).toBe(conflict);
    // Also when wrapped, as a caller's error with a cause.
    expect(isJetStreamRevisionConflict(new Error('wrapped', { cause: apiError(code) }))).toBe(
      conflict,
    );
  });

  it('ignores look-alikes without the JetStream API shape', () => {
    expect(isJetStreamRevisionConflict({ code: 10071 })).toBe(false);
    expect(isJetStreamRevisionConflict(new Error('wrong last sequence'))).toBe(false);
    expect(isJetStreamRevisionConflict(undefined)).toBe(false);
    expect(jetStreamApiCode('10071')).toBeUndefined();
  });

  it('recognises stream not found by code, not by message', () => {
    expect(isStreamNotFound(apiError(10059, 'stream not found'))).toBe(true);
    expect(isStreamNotFound(apiError(10058, 'stream not found'))).toBe(false);
  });

  it('tells no responders from a timeout', () => {
    const noResponders = new RequestError('no responders', {
      cause: new NoRespondersError('$JS.API.X'),
    });
    expect(isNoResponders(noResponders)).toBe(true);
    expect(isNatsTimeout(noResponders)).toBe(false);
    const timeout = new TimeoutError();
    expect(isNatsTimeout(timeout)).toBe(true);
    expect(isNoResponders(timeout)).toBe(false);
  });

  it('survives a cause cycle', () => {
    const a = new Error('a') as Error & { cause?: unknown };
    const b = new Error('b', { cause: a });
    a.cause = b;
    expect(isNoResponders(a)).toBe(false);
  });

  it('wraps a timeout with its hint and other failures with their message', () => {
    const timeout = toNatsRequestError(new TimeoutError(), 's.x', 'Reading x', 'Check y.');
    expect(isNatsRequestError(timeout)).toBe(true);
    expect(timeout).toMatchObject({ code: 'ERR_NATS_TIMEOUT', subject: 's.x' });
    expect(timeout.message).toBe('Reading x timed out (s.x). Check y.');
    const refused = toNatsRequestError(
      new PermissionViolationError('Permissions Violation for Publish to "s.x"', 'publish', 's.x'),
      's.x',
      'Reading x',
    );
    expect(refused.code).toBe('ERR_NATS_REQUEST');
    expect(refused.message).toMatch(/refused it for permissions/);
    expect(refused.cause).toBeInstanceOf(PermissionViolationError);
  });
});
