/**
 * Resources and caps, end to end, in one process:
 *
 * 1. parse the quantities an operator writes in config,
 * 2. resolve each job's resources through layered defaults
 *    (job -> label set -> scaler -> global -> zero),
 * 3. reserve them against per-scaler and orchestrator-wide caps, all or nothing,
 * 4. print what was granted, what was refused and why.
 *
 * Run: npx tsx examples/02-resources-and-caps.ts
 */
import { ErrorCode, isScalerError } from 'scaler-primitives';
import { CapTracker } from 'scaler-primitives/caps';
import {
  formatCpu,
  formatMemory,
  parseMemory,
  type ResourceRequest,
  resolveResources,
  resourceCapSchema,
} from 'scaler-primitives/resources';

// Config as an operator writes it.
const globalDefaults: ResourceRequest = { requests: { cpus: '500m', memory: '512m' } };
const scalers = {
  'linux-small': {
    defaults: { requests: { cpus: 1, memory: '2g' } } satisfies ResourceRequest,
    cap: resourceCapSchema.parse({ maxCpu: '4', maxMemory: '8Gi' }),
  },
  'linux-large': {
    defaults: { requests: { cpus: 4, memory: '16Gi' } } satisfies ResourceRequest,
    cap: resourceCapSchema.parse({ maxCpu: 16, maxMemory: '64Gi' }),
  },
};
const orchestratorCap = resourceCapSchema.parse({ maxCpu: 12, maxMemory: '48Gi' });

console.log(
  `"2g" is ${parseMemory('2g')} bytes; "500M" in the kubernetes convention is ${parseMemory('500M', { convention: 'kubernetes' })}\n`,
);

const caps = new CapTracker({
  caps: {
    global: orchestratorCap,
    ...Object.fromEntries(Object.entries(scalers).map(([name, s]) => [`scaler:${name}`, s.cap])),
  },
});

interface Job {
  id: string;
  scaler: keyof typeof scalers;
  labelSet?: ResourceRequest;
  resources?: ResourceRequest;
}
const jobs: Job[] = [
  { id: 'lint', scaler: 'linux-small' },
  { id: 'unit', scaler: 'linux-small', resources: { limits: { cpus: '1500m' } } },
  { id: 'e2e', scaler: 'linux-small', labelSet: { requests: { memory: '3Gi' } } },
  { id: 'build', scaler: 'linux-large', resources: { requests: { cpus: 8, memory: '24Gi' } } },
  { id: 'docs', scaler: 'linux-small' },
  { id: 'bad', scaler: 'linux-small', resources: { requests: { cpus: 4 }, limits: { cpus: 2 } } },
  { id: 'huge', scaler: 'linux-large', resources: { requests: { cpus: 32 } } },
];

const rows: string[][] = [['job', 'scaler', 'cpu req', 'mem req', 'from', 'result']];
for (const job of jobs) {
  const scaler = scalers[job.scaler];
  let resolved: ReturnType<typeof resolveResources>;
  try {
    resolved = resolveResources([job.resources, job.labelSet, scaler.defaults, globalDefaults]);
  } catch (error) {
    if (!isScalerError(error, ErrorCode.RESOURCE_CONFLICT)) throw error;
    rows.push([
      job.id,
      job.scaler,
      '-',
      '-',
      error.requestLayer,
      `refused: ${error.dimension} request ${error.request} > limit ${error.limit}`,
    ]);
    continue;
  }
  const scopes = ['global', `scaler:${job.scaler}`];
  const result = caps.tryReserve(job.id, scopes, resolved.requests);
  const from = `${resolved.provenance.requests.cpus}/${resolved.provenance.requests.memBytes}`;
  let outcome = 'reserved';
  if (!result.ok) {
    const fmtValue = result.dimension === 'cpu' ? formatCpu : formatMemory;
    outcome = `${result.neverFits ? 'never fits' : 'waits'}: ${result.scope} ${result.dimension} ${fmtValue(result.used)} used + ${fmtValue(result.requested)} > ${fmtValue(result.max)}`;
  }
  rows.push([
    job.id,
    job.scaler,
    formatCpu(resolved.requests.cpus),
    formatMemory(resolved.requests.memBytes),
    from,
    outcome,
  ]);
}
printTable(rows);

console.log('\nUsage against caps:');
const usageRows = [['scope', 'cpu used / cap', 'memory used / cap', 'reservations']];
for (const [scope, { cap, usage }] of Object.entries(caps.snapshot().scopes)) {
  usageRows.push([
    scope,
    `${formatCpu(usage.cpus)} / ${cap?.maxCpu === undefined ? '-' : formatCpu(cap.maxCpu)}`,
    `${formatMemory(usage.memBytes)} / ${cap?.maxMemoryBytes === undefined ? '-' : formatMemory(cap.maxMemoryBytes)}`,
    String(usage.reservations),
  ]);
}
printTable(usageRows);

for (const job of jobs) caps.release(job.id);
const after = caps.usage('global');
console.log(
  `\nAfter releasing every job: global holds ${formatCpu(after.cpus)} CPU, ${formatMemory(after.memBytes)} memory.`,
);

function printTable(table: string[][]): void {
  const widths = table[0]!.map((_, i) => Math.max(...table.map((row) => row[i]!.length)));
  for (const [n, row] of table.entries()) {
    console.log(
      row
        .map((cell, i) => cell.padEnd(widths[i]!))
        .join('  ')
        .trimEnd(),
    );
    if (n === 0) console.log(widths.map((w) => '-'.repeat(w)).join('  '));
  }
}
