/**
 * A timer delay in whole milliseconds, at least 1. Node keeps one timer list
 * per distinct duration, so a jittered fraction would make (and drop) a new
 * list for every wait; whole milliseconds reuse a few.
 */
export function timerMs(ms: number): number {
  return Math.max(1, Math.round(ms));
}
