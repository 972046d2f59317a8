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
 */
export interface ConformanceCheck {
  /** What the check proves, as a sentence (a test name). */
  name: string;
  /**
   * Run it: resolves when the implementation keeps the promise, rejects with
   * why not. A check that does not apply (an optional method the
   * implementation lacks) calls the runner's `context.skip(reason)` when the
   * runner passes a context with one (vitest and `node:test` do, when `run`
   * is given to them as the test function); without one it rejects with
   * {@link ConformanceSkipped}, so a skip is never counted as a pass.
   */
  run: (
    ...context: [
      {
        /**
         * Mark the running test skipped (vitest also aborts it by throwing): what a test
         * runner passes to a test function, as far as the suites use it (vitest's and
         * `node:test`'s `TestContext` both have `skip`).
         */
        skip?: (note?: string) => unknown;
      }?,
    ]
  ) => Promise<void>;
}

/**
 * A conformance check that does not apply to this implementation (it lacks an
 * optional method, or the suite was given no way to cause the fault the check
 * needs), run where the runner offers no `skip`: the check rejects with this,
 * so a skip never passes for a pass. Catch it to count skips yourself.
 *
 * @example
 * ```ts
 * import { ConformanceSkipped, poolLedgerConformance } from 'scaler-primitives/testing';
 * import type { PoolLedger } from 'scaler-primitives/ledger';
 *
 * declare const make: () => PoolLedger;
 * for (const check of poolLedgerConformance(make)) {
 *   await check.run().catch((error) => {
 *     if (error instanceof ConformanceSkipped) console.log(`skipped: ${check.name} (${error.reason})`);
 *     else throw error;
 *   });
 * }
 * ```
 */
export class ConformanceSkipped extends Error {
  /** Why the check does not apply. */
  readonly reason: string;
  /**
   * @param check - The check's name.
   * @param reason - Why it does not apply.
   */
  constructor(check: string, reason: string) {
    super(`Skipped (not passed): ${check}: ${reason}`);
    this.name = 'ConformanceSkipped';
    this.reason = reason;
  }
}

// Thrown after a runner's `skip` that does not throw itself (node:test): ends the check.
export class SkipSignal extends Error {}

/**
 * Skip a check: through the runner's `skip` when it has one, else by
 * rejecting with {@link ConformanceSkipped}. Never returns.
 */
export function skipCheck(
  context: ConformanceRunContext | undefined,
  check: string,
  reason: string,
): never {
  if (typeof context?.skip === 'function') {
    context.skip(reason);
    throw new SkipSignal(reason);
  }
  throw new ConformanceSkipped(check, reason);
}

/** Run a check body, ending quietly after a runner-handled skip. */
export async function runSkippable(body: () => Promise<void>): Promise<void> {
  try {
    await body();
  } catch (error) {
    if (error instanceof SkipSignal) return;
    throw error;
  }
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

/** What a test runner passes to a check's `run`, as far as the conformance suites use it. */
export type ConformanceRunContext = NonNullable<Parameters<ConformanceCheck['run']>[0]>;
