import { describe, expect, it } from 'vitest';
import { timerMs } from '../../src/internal/timer-ms.js';
import { effectiveUid } from '../../src/internal/uid.js';

describe('timerMs', () => {
  it('rounds a delay to whole milliseconds, never below 1', () => {
    expect(timerMs(8.4)).toBe(8);
    expect(timerMs(8.5)).toBe(9);
    expect(timerMs(0)).toBe(1);
    expect(timerMs(-3)).toBe(1);
  });
});

describe('effectiveUid', () => {
  it("is the process's effective uid, read at each call", () => {
    expect(effectiveUid()).toBe(process.geteuid?.());
  });
});
