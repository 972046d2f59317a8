import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { resolveClock, systemClock } from '../../src/clock.js';

const src = join(import.meta.dirname, '..', '..', 'src');

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? files(path) : path.endsWith('.ts') ? [path] : [];
  });
}

// The clock module is the only place that reads the system clock or starts a
// timer; everything else takes a Clock (or uses systemClock by name for real waits).
const FORBIDDEN =
  /\b(Date\.now|performance\.now|performance\.timeOrigin|(?<![.\w])setTimeout|(?<![.\w])setInterval|(?<![.\w])clearTimeout|(?<![.\w])clearInterval|new Date\(\))/;

// A method declaration named like a timer (a Clock implementation such as the
// test kit's TestClock: `setTimeout(fn: () => void, ms: number): ClockTimer {`)
// is not a call.
const DECLARATION =
  /^\s*(?:setTimeout|setInterval|clearTimeout|clearInterval)\(.*\)\s*:\s*[\w<>| ]+\{\s*$/;

describe('the clock seam', () => {
  it('no file under src/ but the clock module reads the clock or starts a timer itself', () => {
    const offenders: string[] = [];
    for (const file of files(src)) {
      const rel = relative(src, file);
      if (rel === 'clock.ts' || rel.startsWith('clock/')) continue;
      readFileSync(file, 'utf8')
        .split('\n')
        .forEach((line, index) => {
          const code = line.replace(/\/\*.*?\*\//g, '').replace(/\/\/.*$/, '');
          if (/^\s*\*/.test(code)) return; // TSDoc prose
          if (DECLARATION.test(code)) return;
          if (FORBIDDEN.test(code)) offenders.push(`${rel}:${index + 1}: ${line.trim()}`);
        });
    }
    expect(offenders).toEqual([]);
  });

  it('the scan recognises a direct call (so it can fail)', () => {
    expect(FORBIDDEN.test('const t = Date.now();')).toBe(true);
    expect(FORBIDDEN.test('setTimeout(fn, 5)')).toBe(true);
    expect(FORBIDDEN.test('this.clock.setTimeout(fn, 5)')).toBe(false);
    expect(DECLARATION.test('  setTimeout(fn: () => void, ms: number): ClockTimer {')).toBe(true);
    expect(DECLARATION.test('  setTimeout(fn, 5);')).toBe(false);
    expect(DECLARATION.test('  setTimeout(() => done(), 5);')).toBe(false);
    expect(DECLARATION.test('  setTimeout((): void => {')).toBe(false);
  });

  it('resolveClock: clock wins, a bare now keeps the system timers, bad clocks are refused', () => {
    expect(resolveClock(undefined, undefined)).toBe(systemClock);
    const now = () => 42;
    const clock = resolveClock(undefined, now);
    expect(clock.now()).toBe(42);
    expect(clock.setTimeout).toBe(systemClock.setTimeout);
    const custom = { ...systemClock, now: () => 7 };
    expect(resolveClock(custom, now)).toBe(custom);
    expect(() => resolveClock({ ...systemClock, setInterval: 1 } as never, undefined)).toThrow(
      /clock\.setInterval/,
    );
  });

  it('systemClock timers follow Node: unref is honoured and clear cancels', async () => {
    let fired = false;
    const t = systemClock.setTimeout(() => {
      fired = true;
    }, 1);
    expect(t.unref().hasRef()).toBe(false);
    systemClock.clearTimeout(t);
    await new Promise((resolve) => systemClock.setTimeout(() => resolve(undefined), 10));
    expect(fired).toBe(false);
  });
});
