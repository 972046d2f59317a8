// Instants as the TestClock takes them (a `Date`, an ISO 8601 string, epoch
// milliseconds), turned into epoch milliseconds or refused.

/**
 * An instant: a `Date`, an ISO 8601 string, or epoch milliseconds.
 */
export type Instant = Date | string | number;

const ISO_INSTANT =
  /^\d{4}-\d{2}-\d{2}(?:T\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(?:Z|[+-]\d{2}:?\d{2})?)?$/;

/** Epoch milliseconds of an instant; fails closed on anything else. @internal */
export function toEpoch(name: string, instant: Instant): number {
  let ms: number;
  if (instant instanceof Date) ms = instant.getTime();
  else if (typeof instant === 'number') ms = instant;
  else if (typeof instant === 'string' && ISO_INSTANT.test(instant)) ms = Date.parse(instant);
  else ms = Number.NaN;
  if (!Number.isFinite(ms) || Math.abs(ms) > 8.64e15) {
    throw new TypeError(
      `Expected \`${name}\` to be a Date, an ISO 8601 string such as "2026-01-05T09:00:00Z", or epoch milliseconds, got \`${String(instant)}\``,
    );
  }
  return ms;
}

/** The ISO string of epoch milliseconds. @internal */
export function iso(ms: number): string {
  return new Date(ms).toISOString();
}
