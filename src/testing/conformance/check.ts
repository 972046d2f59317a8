/**
 * What every conformance suite is made of: named async checks, and the small
 * assertions they use (no test framework: a failed check rejects with an
 * `Error` whose message says what was expected and what was found).
 */
import { isDeepStrictEqual } from 'node:util';
import { sleep } from '../../clock.js';

/**
 * One named check of a conformance suite. A suite is an array of them, so any
 * runner can run it: `for (const c of suite) test(c.name, c.run)`.
 *
 * @example
 * ```ts
 * import { test } from 'node:test';
 * import { poolLedgerConformance } from 'scaler-primitives/testing';
 * import type { PoolLedger } from 'scaler-primitives/ledger';
 *
 * declare const MyLedger: new (options: { instanceId: string }) => PoolLedger; // yours
 * for (const check of poolLedgerConformance(({ instanceId }) => new MyLedger({ instanceId }))) {
 *   test(check.name, check.run);
 * }
 * ```
 */
export interface ConformanceCheck {
  /** What the check proves, as a sentence (a test name). */
  name: string;
  /** Run it: resolves when the implementation keeps the promise, rejects with why not. */
  run: () => Promise<void>;
}

/**
 * A failed expectation inside a conformance check: its message says what was
 * expected and what was found.
 *
 * @example
 * ```ts
 * import { type ConformanceCheck, ConformanceError } from 'scaler-primitives/testing';
 *
 * declare const check: ConformanceCheck;
 * await check.run().catch((error) => {
 *   if (error instanceof ConformanceError) console.log(`${check.name}: ${error.message}`);
 * });
 * ```
 */
export class ConformanceError extends Error {
  /**
   * @param message - What was expected, and what was found.
   */
  constructor(message: string) {
    super(message);
    this.name = 'ConformanceError';
  }
}

export function show(value: unknown): string {
  return JSON.stringify(value, (_key, v) => (typeof v === 'bigint' ? `${v}n` : v)) ?? String(value);
}

export function expectEqual(actual: unknown, expected: unknown, what: string): void {
  if (isDeepStrictEqual(actual, expected)) return;
  throw new ConformanceError(`${what}: expected ${show(expected)}, got ${show(actual)}`);
}

export function expectTrue(condition: boolean, message: string): void {
  if (!condition) throw new ConformanceError(message);
}

export async function expectReject(
  run: () => Promise<unknown>,
  test: (error: unknown) => boolean,
  what: string,
): Promise<void> {
  let result: unknown;
  try {
    result = await run();
  } catch (error) {
    if (test(error)) return;
    throw new ConformanceError(
      `${what}: rejected with the wrong error: ${error instanceof Error ? `${error.name}: ${error.message}` : show(error)}`,
    );
  }
  throw new ConformanceError(`${what}: expected a rejection, got ${show(result)}`);
}

/** Poll `probe` on the real clock until it answers true or `timeoutMs` passes. */
export async function eventually(
  probe: () => Promise<boolean>,
  timeoutMs: number,
  message: string,
): Promise<void> {
  let waited = 0;
  for (let pause = 10; ; pause = Math.min(pause * 2, 250)) {
    if (await probe()) return;
    if (waited >= timeoutMs) throw new ConformanceError(message);
    await sleep(pause);
    waited += pause;
  }
}

export function sample(): string {
  return Math.random().toString(36).slice(2, 8);
}
