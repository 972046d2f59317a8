/**
 * The public surface is reviewed: api/*.api.md holds the declarations of every
 * subpath as users of the built package see them, and this test fails when the
 * build differs, so an unintended change of the API cannot land unnoticed.
 * An intended change is one `npm run api:update` and a reviewed diff of api/.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
// @ts-expect-error: a plain .mjs build script without types
import * as apiReport from '../scripts/api-report.mjs';
import { ensureBuilt, root } from './helpers/built-package.js';

const { buildReports, countProblems, declarationErrors, staleReports } = apiReport;

type Reports = Map<string, string> & { unnameable: string[]; counts: unknown };

function declarationFiles(): string[] {
  const dist = join(root, 'dist');
  return readdirSync(dist, { recursive: true, encoding: 'utf8' })
    .filter((name) => name.endsWith('.d.ts') || name.endsWith('.d.cts'))
    .map((name) => join(dist, name));
}

describe('API report', () => {
  let reports: Reports;
  beforeAll(async () => {
    await ensureBuilt();
    reports = buildReports(root) as Reports;
  }, 300_000);

  it('api/ matches the built declarations of every subpath', () => {
    const problems: string[] = staleReports(reports, join(root, 'api'));
    const hint = 'the public API changed: if intended, run `npm run api:update` and commit api/';
    expect(problems, hint).toEqual([]);
  });

  it('covers every subpath of the exports map', () => {
    const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
    const subpaths = Object.keys(pkg.exports).filter((key) => key !== './package.json');
    expect(reports.size).toBe(subpaths.length);
    for (const text of reports.values()) expect(text).toMatch(/^# API report: `scaler-primitives/);
  });

  it('the public names stay within their limits, one spelling each (npm run api:count)', () => {
    expect(countProblems(reports.counts)).toEqual([]);
  });

  it('every type a public signature uses is exported by a subpath', () => {
    expect(reports.unnameable).toEqual([]);
  });

  it('the name check fails on an unnameable type, a root over 40 names, or over 250 in all', () => {
    const within = {
      perSubpath: { 'scaler-primitives': 40, 'scaler-primitives/ledger': 30 },
      total: 250,
      aliases: [],
      unnameable: [],
    };
    expect(countProblems(within)).toEqual([]);
    expect(
      countProblems({ ...within, unnameable: ['scaler-primitives/nftables: NftCommand'] }),
    ).toEqual([
      'exported by no subpath, yet used by a public signature: scaler-primitives/nftables: NftCommand',
    ]);
    expect(countProblems({ ...within, perSubpath: { 'scaler-primitives': 41 } })).toEqual([
      'scaler-primitives exports 41 names, at most 40',
    ]);
    expect(countProblems({ ...within, total: 251 })).toEqual([
      '251 distinct public names, at most 250',
    ]);
  });

  it('the published declarations type-check on their own, without skipLibCheck', () => {
    expect(declarationErrors(root)).toEqual([]);
  });

  it('the published declarations hold no private member and no @internal declaration', () => {
    const leaks: string[] = [];
    for (const file of declarationFiles()) {
      const lines = readFileSync(file, 'utf8').split('\n');
      lines.forEach((line, index) => {
        if (/^\s*(?:private|protected)\s(?!constructor\()/.test(line) || /@internal\b/.test(line)) {
          leaks.push(`${file.slice(root.length + 1)}:${index + 1}: ${line.trim()}`);
        }
      });
    }
    expect(leaks).toEqual([]);
  });
});
