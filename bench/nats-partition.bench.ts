/**
 * `npm run bench -- nats-partition`: the soak of the NATS partition nemesis
 * (test/helpers/nats-partition.ts): `BENCH_PARTITION_ROUNDS` rounds (default
 * 10), every other one with two busy-loop processes beside it, each on a fresh
 * 3-node cluster in network namespaces. Per round: the time from each heal to
 * the first grant, the longest gap without a grant after it, workers that
 * answered nothing after a heal, grants under a fenced lease, revisions over
 * the cap, orphan rows and late calls. Needs root, `ip`, `nft` and `nats-server`;
 * about 90 s a round.
 */
import { execFileSync } from 'node:child_process';
import {
  describeRound,
  type RoundFigures,
  runPartitionRound,
} from '../test/helpers/nats-partition.js';
import type { BenchTable } from './lib.js';

const ROUNDS = Number(process.env.BENCH_PARTITION_ROUNDS ?? 10);

function available(): string | undefined {
  if (process.getuid?.() !== 0) return 'needs root (network namespaces)';
  for (const tool of ['ip', 'nft', 'nats-server']) {
    try {
      execFileSync('which', [tool], { stdio: 'ignore' });
    } catch {
      return `needs ${tool}`;
    }
  }
  return undefined;
}

const ms = (value: number) => (Number.isFinite(value) ? String(value) : 'none');

export default async function bench(): Promise<BenchTable[]> {
  const missing = available();
  if (missing) return [{ title: 'NATS partition soak', rows: [], notes: [`skipped: ${missing}`] }];
  const rounds: RoundFigures[] = [];
  const failures: string[] = [];
  for (let i = 0; i < ROUNDS; i++) {
    const busy = i % 2 === 1;
    try {
      const round = await runPartitionRound({ busy });
      rounds.push(round);
      console.error(`round ${i + 1}/${ROUNDS}: ${describeRound(round)}`);
      for (const detail of [...round.fencedGrants, ...round.orphans, ...round.lateCalls]) {
        console.error(`  ${detail}`);
      }
      for (const heal of round.heals) {
        if (heal.silent.length > 0 || heal.firstGrantMs >= 2000 || !(heal.afterWritableMs < 2000)) {
          console.error(`  ${heal.what} (grants/refused/other per s): ${heal.timeline}`);
        }
      }
    } catch (error) {
      failures.push(`round ${i + 1}${busy ? ' (busy)' : ''}: ${(error as Error).message}`);
      console.error(`round ${i + 1} failed: ${(error as Error).stack}`);
    }
  }
  const rows = rounds.map((round, i) => {
    const heal = (what: string) => round.heals.find((h) => h.what === what)!;
    const cell = (what: string) => {
      const h = heal(what);
      return `${ms(h.firstGrantMs)} / ${ms(h.afterLeaderMs)} / ${ms(h.afterWritableMs)} / ${h.longestGapMs}${h.leaderChanges ? ` (${h.leaderChanges}L)` : ''}`;
    };
    return {
      round: i + 1,
      cpus: round.busy ? 'busy' : 'idle',
      'leader heal': cell('leader isolated'),
      'split heal': cell('bridge split'),
      'pause resume': cell('worker paused'),
      'combiner kill': cell('combiner killed'),
      'silent / never': `${round.heals.reduce((s, h) => s + h.silent.length, 0)} / ${round.heals.reduce((s, h) => s + h.never.length, 0)}`,
      'fenced grants': round.fencedGrants.length,
      'over cap': round.overCap,
      orphans: round.orphans.length,
      'late calls': round.lateCalls.length,
      'slowest call ms': round.slowestCallMs,
      'outcome unknown': round.outcomeUnknown,
      grants: round.grants,
    };
  });
  const firsts = rounds.flatMap((r) => r.heals.map((h) => h.firstGrantMs));
  const under2s = firsts.filter((v) => v < 2000).length;
  const afterLeader = rounds.flatMap((r) => r.heals.map((h) => h.afterLeaderMs));
  const afterUnder2s = afterLeader.filter((v) => v < 2000).length;
  const afterWrite = rounds.flatMap((r) => r.heals.map((h) => h.afterWritableMs));
  const writeUnder2s = afterWrite.filter((v) => v < 2000).length;
  return [
    {
      title: `NATS partition soak: ${rounds.length} rounds (nats-server ${rounds[0]?.serverVersion ?? '?'}, 3-node R3, 4 workers, lease 3 s, timeoutMs 5 s); heal columns: first grant after the heal / first grant after the stream had a leader again / first grant after the stream took a write again (the observer's, every 250 ms) / longest time without a grant in the 10 s after the heal, all ms (stream leader changes in those 10 s)`,
      rows,
      notes: [
        `first grant within 2 s of a heal: ${under2s} of ${firsts.length}; worst ${ms(Math.max(...firsts))} ms`,
        `first grant within 2 s of the stream having a leader again: ${afterUnder2s} of ${afterLeader.length}; worst ${ms(Math.max(...afterLeader))} ms`,
        `first grant within 2 s of the stream taking a write again: ${writeUnder2s} of ${afterWrite.length}; worst ${ms(Math.max(...afterWrite.filter((v) => !Number.isNaN(v))))} ms${afterWrite.some(Number.isNaN) ? `; ${afterWrite.filter(Number.isNaN).length} heal(s) after which it took none` : ''}`,
        `fenced grants ${rounds.reduce((s, r) => s + r.fencedGrants.length, 0)}, over cap ${rounds.reduce((s, r) => s + r.overCap, 0)}, orphan rows ${rounds.reduce((s, r) => s + r.orphans.length, 0)}, late calls ${rounds.reduce((s, r) => s + r.lateCalls.length, 0)}, workers not granted or refused within 10 s of a heal (or of the stream's leader coming back) ${rounds.reduce((s, r) => s + r.heals.reduce((t, h) => t + h.silent.length, 0), 0)}, never again in the round ${rounds.reduce((s, r) => s + r.heals.reduce((t, h) => t + h.never.length, 0), 0)}`,
        ...failures.map((f) => `failed: ${f}`),
      ],
    },
  ];
}
