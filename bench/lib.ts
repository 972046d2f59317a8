/** One table the benchmark prints. */
export interface BenchTable {
  title: string;
  rows: Array<Record<string, string | number>>;
  /** Lines printed under the table: targets and whether they were met. */
  notes?: string[];
}

/** Run `fn` repeatedly for about `ms` milliseconds (after a warm-up) and return calls per second. */
export function opsPerSecond(fn: () => void, ms = 500): number {
  const warmUntil = performance.now() + Math.min(100, ms / 5);
  while (performance.now() < warmUntil) fn();
  let calls = 0;
  const start = performance.now();
  let now = start;
  while (now - start < ms) {
    for (let i = 0; i < 1000; i++) fn();
    calls += 1000;
    now = performance.now();
  }
  return (calls * 1000) / (now - start);
}

/** Percentile (0-100) of a list of numbers. */
export function percentile(values: number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const index = Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1);
  return sorted[Math.max(0, index)]!;
}

/** Format a number for a table: thousands separators, `digits` decimals. */
export function fmt(value: number, digits = 0): string {
  return value.toLocaleString('en-US', {
    maximumFractionDigits: digits,
    minimumFractionDigits: digits,
  });
}

/** Render a table as aligned text. */
export function renderTable(table: BenchTable): string {
  if (table.rows.length === 0) {
    return [
      `## ${table.title}`,
      '',
      '(no rows)',
      ...(table.notes?.length ? ['', ...table.notes] : []),
    ].join('\n');
  }
  const headers = [...new Set(table.rows.flatMap((row) => Object.keys(row)))];
  const cells = table.rows.map((row) => headers.map((h) => String(row[h] ?? '')));
  const widths = headers.map((h, i) => Math.max(h.length, ...cells.map((c) => c[i]!.length)));
  const line = (values: string[]) =>
    `| ${values.map((v, i) => (i === 0 ? v.padEnd(widths[i]!) : v.padStart(widths[i]!))).join(' | ')} |`;
  const out = [`## ${table.title}`, '', line(headers)];
  out.push(
    `|${widths.map((w, i) => (i === 0 ? `:${'-'.repeat(w + 1)}` : `${'-'.repeat(w + 1)}:`)).join('|')}|`,
  );
  for (const row of cells) out.push(line(row));
  if (table.notes?.length) out.push('', ...table.notes);
  return out.join('\n');
}
