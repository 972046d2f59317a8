/**
 * `npm run demo` (examples/01-quickstart.ts): runs to the end with real child
 * processes and a real ledger, and its summary shows every job accounted for,
 * no limit exceeded and nothing left in the pool.
 */
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const run = promisify(execFile);
const root = join(import.meta.dirname, '../..');

describe('npm run demo', () => {
  it('is what the demo script runs', () => {
    const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
      scripts: Record<string, string>;
    };
    expect(pkg.scripts.demo).toContain('examples/01-quickstart.ts');
  });

  it('runs every job, fails the impossible ones fast, and ends with an empty pool', async () => {
    const { stdout } = await run(
      process.execPath,
      ['--import', 'tsx', join('examples', '01-quickstart.ts')],
      { cwd: root, timeout: 60_000 },
    );
    const summary = stdout.slice(stdout.indexOf('\nSummary'));
    const row = (job: string) =>
      summary
        .split('\n')
        .find((line) => line.startsWith(`${job} `))
        ?.split(/\s{2,}/);
    for (const job of ['lint', 'unit-1', 'unit-2', 'unit-3', 'docs', 'audit']) {
      expect(row(job)?.slice(2, 4), job).toEqual(['linux-small', 'done']);
    }
    for (const job of ['build', 'e2e', 'package']) {
      expect(row(job)?.slice(2, 4), job).toEqual(['linux-large', 'done']);
    }
    expect(row('bench')?.[3]).toBe('failed');
    expect(row('bench')?.at(-1)).toMatch(/^never fits: global-cap cpu 16 > 6$/);
    expect(row('msi')?.at(-1)).toMatch(/^no match: linux-small labels windows/);

    const peaks = summary
      .split('\n')
      .filter((line) => line.startsWith('linux-'))
      .map((line) => line.split(/\s{2,}/));
    const small = peaks.find((p) => p[0] === 'linux-small')!;
    const large = peaks.find((p) => p[0] === 'linux-large')!;
    const [smallPeak, smallMax] = small[2]!.split(' / ').map(Number);
    const [largePeak, largeMax] = large[2]!.split(' / ').map(Number);
    expect(smallPeak).toBeGreaterThan(0);
    expect(smallPeak).toBeLessThanOrEqual(smallMax!);
    expect(largePeak).toBeLessThanOrEqual(largeMax!);
    expect(Number(small[3]!.split(' / ')[0])).toBeLessThanOrEqual(3);

    // Progress lines never show usage above the caps.
    const lines = [
      ...stdout.matchAll(/agents (\d+)\/(\d+) cpu ([\d.]+)\/(\d+) .* pool cpu ([\d.]+)\/(\d+)/g),
    ];
    expect(lines.length).toBeGreaterThan(10);
    for (const match of lines) {
      const [, agents, maxAgents, cpu, maxCpu, poolCpu, poolMax] = match.map(Number);
      expect(agents).toBeLessThanOrEqual(maxAgents!);
      expect(cpu).toBeLessThanOrEqual(maxCpu!);
      expect(poolCpu).toBeLessThanOrEqual(poolMax!);
    }
    expect(stdout).toMatch(
      /9 done, 2 failed fast, 0 unfinished; cold starts 9; after shutdown: 0 agents tracked, pool holds 0 CPU and 0 memory;/,
    );
  });
});
