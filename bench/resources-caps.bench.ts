import { CapTracker } from '../src/caps/index.js';
import { checkFit } from '../src/ledger/document/fit.js';
import type { ReservationRow } from '../src/ledger/types.js';
import { parseCpu, parseMemory, resolveResources } from '../src/resources/index.js';
import { type BenchTable, fmt, opsPerSecond } from './lib.js';

const MEMORY_INPUTS = ['8Gi', '512m', '1.5G', '1073741824', '2g', '.5Ki'];
const CPU_INPUTS = ['500m', '1.5', '2', '.25', '1000m', '4'];

/** A tracker with 51 capped scopes (global + 50 scalers) and `live` reservations held. */
function trackerWith(live: number, scopes: string[]): CapTracker {
  const caps = new CapTracker();
  for (const scope of scopes) caps.setCap(scope, { maxCpu: 1e9, maxMemoryBytes: 2 ** 52 });
  caps.setCap('global', { maxCpu: 1e9, maxMemoryBytes: 2 ** 52 });
  for (let i = 0; i < live; i++) {
    caps.tryReserve(`live-${i}`, ['global', scopes[i % scopes.length]!], {
      cpus: 0.5,
      memBytes: 1024,
    });
  }
  return caps;
}

const GPU = 'nvidia.com/gpu';
const FPGA = 'example.com/fpga';
const EXT_CAP = { maxExtended: { [GPU]: 1e9, [FPGA]: 1e9 } };

/** The same tracker with every scope also capping two extended resources, held by every live row. */
function extendedTrackerWith(live: number, scopes: string[]): CapTracker {
  const caps = new CapTracker();
  for (const scope of [...scopes, 'global']) {
    caps.setCap(scope, { maxCpu: 1e9, maxMemoryBytes: 2 ** 52, ...EXT_CAP });
  }
  for (let i = 0; i < live; i++) {
    caps.tryReserve(`live-${i}`, ['global', scopes[i % scopes.length]!], EXT_REQUEST);
  }
  return caps;
}

const EXT_REQUEST = { cpus: 0.25, memBytes: 4096, extended: { [GPU]: 1, [FPGA]: 1 } };

/** Pairs/s with two extended resources in every request, fresh ids. */
function extendedPairs(live: number): number {
  const caps = extendedTrackerWith(live, SCALERS);
  const start = performance.now();
  for (let n = 0; n < FRESH_IDS.length; n++) {
    const id = FRESH_IDS[n]!;
    if (!caps.tryReserve(id, PAIR_SCOPES[n % 50]!, EXT_REQUEST).ok) throw new Error('refused');
    caps.release(id);
  }
  return (FRESH_IDS.length * 1000) / (performance.now() - start);
}

function ledgerRows(count: number, extended: boolean): ReservationRow[] {
  return Array.from({ length: count }, (_, i) => ({
    instanceId: 'i',
    pid: 1,
    bootId: 'b',
    agentId: `a${i}`,
    cpus: 0.5,
    memBytes: 1024,
    reservedAt: 0,
    ...(extended ? { extended: { [GPU]: 1, [FPGA]: 1 } } : {}),
  }));
}

const SCALERS = Array.from({ length: 50 }, (_, i) => `scaler:${i}`);
const PAIR_SCOPES = SCALERS.map((s) => ['global', s]);
const REQUEST = { cpus: 0.25, memBytes: 4096 };
// Every reservation in real use has a fresh id (an agent id): made before timing.
const FRESH_IDS = Array.from(
  { length: 600_000 },
  (_, i) => `agent-${(i * 2654435761) % 2 ** 32}-${i}`,
);

/** Pairs/s where every reservation has a fresh id, as agents do. */
function freshIdPairs(live: number): number {
  const caps = trackerWith(live, SCALERS);
  const start = performance.now();
  for (let n = 0; n < FRESH_IDS.length; n++) {
    const id = FRESH_IDS[n]!;
    if (!caps.tryReserve(id, PAIR_SCOPES[n % 50]!, REQUEST).ok) throw new Error('refused');
    caps.release(id);
  }
  return (FRESH_IDS.length * 1000) / (performance.now() - start);
}

/** Pairs/s cycling through 1,024 ids: the whole working set sits in L1 when little is held. */
function recycledIdPairs(live: number): number {
  const caps = trackerWith(live, SCALERS);
  const ids = Array.from({ length: 1024 }, (_, i) => `probe-${i}`);
  let n = 0;
  return opsPerSecond(() => {
    const id = ids[n & 1023]!;
    if (!caps.tryReserve(id, PAIR_SCOPES[n % 50]!, REQUEST).ok) throw new Error('refused');
    caps.release(id);
    n++;
  }, 600);
}

export default async function bench(): Promise<BenchTable[]> {
  let i = 0;
  const parseMemoryRate = opsPerSecond(() => {
    parseMemory(MEMORY_INPUTS[i++ % MEMORY_INPUTS.length]!);
  });
  const parseCpuRate = opsPerSecond(() => {
    parseCpu(CPU_INPUTS[i++ % CPU_INPUTS.length]!);
  });
  const layers = [
    { limits: { cpus: '1' } },
    { requests: { memory: '2Gi' } },
    { requests: { cpus: '500m', memory: '1Gi' }, limits: { cpus: 2, memory: '4Gi' } },
    { requests: { cpus: 4, memory: '8Gi' } },
  ];
  const resolveRate = opsPerSecond(() => {
    resolveResources(layers);
  });
  // Interleaved rounds, best of each, so that JIT warm-up and a busy neighbour
  // do not favour whichever configuration runs first.
  let none = 0;
  let small = 0;
  let large = 0;
  let noneRecycled = 0;
  let smallRecycled = 0;
  let largeRecycled = 0;
  for (let round = 0; round < 5; round++) {
    none = Math.max(none, freshIdPairs(0));
    small = Math.max(small, freshIdPairs(10));
    large = Math.max(large, freshIdPairs(10_000));
    noneRecycled = Math.max(noneRecycled, recycledIdPairs(0));
    smallRecycled = Math.max(smallRecycled, recycledIdPairs(10));
    largeRecycled = Math.max(largeRecycled, recycledIdPairs(10_000));
  }
  let extendedSmall = 0;
  for (let round = 0; round < 3; round++)
    extendedSmall = Math.max(extendedSmall, extendedPairs(10));
  const plainRows = ledgerRows(100, false);
  const extRows = ledgerRows(100, true);
  const plainCap = { maxCpu: 1e9, maxMemoryBytes: 2 ** 52 };
  const extCap = { ...plainCap, ...EXT_CAP };
  const fitPlain = opsPerSecond(() => {
    checkFit('p', plainRows, plainCap, REQUEST);
  });
  const fitExtended = opsPerSecond(() => {
    checkFit('p', extRows, extCap, EXT_REQUEST);
  });
  const ratio = none / large;
  return [
    {
      title: 'resources and caps (pure, in-process)',
      rows: [
        { operation: 'parseMemory', 'calls/s': fmt(parseMemoryRate) },
        { operation: 'parseCpu', 'calls/s': fmt(parseCpuRate) },
        { operation: 'resolveResources (4 layers)', 'calls/s': fmt(resolveRate) },
        { operation: 'CapTracker reserve+release, 0 live, 50 scopes', 'calls/s': fmt(none) },
        { operation: 'CapTracker reserve+release, 10 live, 50 scopes', 'calls/s': fmt(small) },
        { operation: 'CapTracker reserve+release, 10,000 live, 50 scopes', 'calls/s': fmt(large) },
        {
          operation: '  same, 1,024 recycled ids, 0 live',
          'calls/s': fmt(noneRecycled),
        },
        {
          operation: '  same, 1,024 recycled ids, 10 live',
          'calls/s': fmt(smallRecycled),
        },
        {
          operation: '  same, 1,024 recycled ids, 10,000 live',
          'calls/s': fmt(largeRecycled),
        },
        {
          operation: 'CapTracker reserve+release, 10 live, 2 extended resources',
          'calls/s': fmt(extendedSmall),
        },
        { operation: 'ledger checkFit, 100 rows (pure)', 'calls/s': fmt(fitPlain) },
        {
          operation: 'ledger checkFit, 100 rows, 2 extended resources',
          'calls/s': fmt(fitExtended),
        },
      ],
      notes: [
        `target reserve+release >= 500,000 pairs/s: ${Math.min(small, large) >= 500_000 ? 'met' : 'NOT met'}`,
        `0-live / 10,000-live = ${fmt(ratio, 2)}x (target <= 1.5x): ${ratio <= 1.5 ? 'met' : 'NOT met'}; 10-live / 10,000-live = ${fmt(small / large, 2)}x`,
        `(pairs use a fresh id each, as agents do; with 1,024 recycled ids the ratio is ${fmt(noneRecycled / largeRecycled, 2)}x,`,
        ' because a small table stays in L1 cache while a 10,000-entry Map does not)',
      ],
    },
  ];
}
