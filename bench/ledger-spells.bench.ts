/**
 * The file ledger through repeated storage-fault spells (the soak of
 * test/integration/ledger-storage-faults.test.ts): 4 worker processes on a
 * 4-CPU pool on a small tmpfs, 20 spells in turn of space filled, inodes
 * exhausted and a read-only remount (1 s each), then 20 more with one worker
 * SIGKILLed in every other spell (restarted under the same instance). After
 * every spell: rows whose caller was not answered ok (strays, must be 0),
 * combining files left once the workers paused, and how soon the first grant
 * came after the fault cleared. Needs root (it mounts tmpfs); otherwise prints
 * a note. `LEDGER_SPELLS` (default 20) spells per run.
 */
import {
  runStorageSpells,
  SPELL_KINDS,
  type SpellFigures,
} from '../test/helpers/storage-spells.js';
import { type BenchTable, fmt, percentile } from './lib.js';

const SPELLS = Number(process.env.LEDGER_SPELLS ?? 20);

function rows(label: string, spells: SpellFigures[]): Array<Record<string, string | number>> {
  return SPELL_KINDS.map((kind) => {
    const of = spells.filter((s) => s.kind === kind);
    const firsts = of.flatMap((s) => (s.firstGrantMs === undefined ? [] : [s.firstGrantMs]));
    return {
      run: label,
      fault: kind,
      spells: of.length,
      'with kill': of.filter((s) => s.killed !== undefined).length,
      strays: of.reduce((sum, s) => sum + s.strays.length, 0),
      'left files': of.reduce((sum, s) => sum + s.leftovers.length, 0),
      'no grant after': of.length - firsts.length,
      'first grant p50 ms': fmt(percentile(firsts, 50)),
      'first grant max ms': fmt(percentile(firsts, 100)),
    };
  });
}

export default async function run(): Promise<BenchTable[]> {
  const title = `File ledger storage-fault spells (4 processes, 4-CPU pool, ${SPELLS} spells of 1 s per run)`;
  if (process.getuid?.() !== 0) {
    return [
      { title, rows: [], notes: ['The benchmark needs root (tmpfs mounts); nothing was run.'] },
    ];
  }
  const kinds = Array.from({ length: SPELLS }, (_, i) => SPELL_KINDS[i % SPELL_KINDS.length]!);
  const plain = await runStorageSpells({ kinds });
  const killed = await runStorageSpells({
    kinds,
    killDuring: kinds.map((_, i) => i).filter((i) => i % 2 === 1),
    staleMs: 2000,
  });
  const calls = (r: typeof plain) =>
    r.results.reduce((sum, result) => sum + (result.calls as number), 0);
  return [
    {
      title,
      rows: [...rows('plain', plain.spells), ...rows('SIGKILL', killed.spells)],
      notes: [
        `Calls answered: ${fmt(calls(plain))} (plain), ${fmt(calls(killed))} (SIGKILL run, survivors).`,
        `Rows left once every worker closed: ${plain.finalRows.length} (plain), ${killed.finalRows.length} (SIGKILL run, killed workers' rows excluded); combining files left: ${plain.finalLeftovers.length} (plain).`,
        'Target: 0 strays; the first grant within 1 s of every fault clearing (after a kill, a killed holder’s lock is taken over once stale, staleMs 2 s here).',
      ],
    },
  ];
}
