/**
 * The extended resources of a pool as `ledger usage` and `ledger top` show
 * them: used and maximum counts, and for a resource whose ids the cap lists,
 * the ids no live row holds.
 */
import type { PoolSnapshot } from '../../ledger/index.js';

/** One extended resource of a pool: held by live rows, the cap, and the ids no live row holds. */
export interface ExtendedUsage {
  used: number;
  max: number | null;
  free?: string[];
}

// Every extended resource the cap names or a live row holds. `free` (for a
// resource whose ids the cap lists) is what the next grant may be given: the
// ids no live row holds; a row of a writer that assigns no ids (`?` in `ls`)
// still counts in `used`.
export function extendedUsage(s: PoolSnapshot): Record<string, ExtendedUsage> {
  const names = new Set([
    ...Object.keys(s.cap.maxExtended ?? {}),
    ...Object.keys(s.cap.devices ?? {}),
    ...(s.cap.provides ?? []),
    ...Object.keys(s.usage.extended ?? {}),
  ]);
  const out: Record<string, ExtendedUsage> = {};
  for (const name of [...names].sort()) {
    const entry: ExtendedUsage = {
      used: s.usage.extended?.[name] ?? 0,
      max: s.cap.maxExtended?.[name] ?? null,
    };
    const ids = s.cap.devices?.[name];
    if (ids !== undefined) {
      const held = new Set(s.live.flatMap((row) => row.devices?.[name] ?? []));
      entry.free = ids.filter((id) => !held.has(id));
    }
    out[name] = entry;
  }
  return out;
}

// `<resource> <used>/<max>` per resource (`;` between them), with `free <ids>`
// when the cap lists ids; `-` for none.
export function showExtended(extended: Record<string, ExtendedUsage>): string {
  const parts = Object.entries(extended).map(([name, e]) => {
    const free =
      e.free === undefined ? '' : ` free ${e.free.length === 0 ? '-' : e.free.join(',')}`;
    return `${name} ${e.used}/${e.max ?? '-'}${free}`;
  });
  return parts.length === 0 ? '-' : parts.join('; ');
}
