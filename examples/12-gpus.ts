/**
 * GPUs and other extended resources, and Kubernetes quantities, in one process:
 *
 * 1. read job specs mirrored from Kubernetes pod specs (`{ convention: 'kubernetes' }`),
 * 2. resolve them through layered defaults, GPUs included (whole counts, request == limit),
 * 3. reserve them against a GPU machine's cap and a CPU-only scaler's cap, all or nothing,
 * 4. print what was granted, what was refused and why.
 *
 * Run: npx tsx examples/12-gpus.ts
 */
import { CapTracker } from 'scaler-primitives/caps';
import {
  formatCpu,
  formatMemory,
  type ResourceRequest,
  resolveResources,
  resourceCapSchema,
} from 'scaler-primitives/resources';

const k8s = { convention: 'kubernetes' } as const;

// A pod spec's resources, as `kubectl get pod -o json` prints them.
const podSpecs: Record<string, ResourceRequest> = {
  train: { limits: { cpus: '3500m', memory: '12Gi', 'nvidia.com/gpu': '1' } },
  'train-big': { limits: { cpus: '4', memory: '16Gi', 'nvidia.com/gpu': '2' } },
  lint: { requests: { cpus: '250m', memory: '256Mi' } },
};

const caps = new CapTracker({
  caps: {
    // The GPU box: 8 cores, 32 GiB, 2 GPUs.
    'pool:gpu-box': resourceCapSchema.parse({
      maxCpu: 8,
      maxMemory: '32Gi',
      maxExtended: { 'nvidia.com/gpu': 2 },
    }),
    // A CPU-only scaler: it declares no GPU, so GPU jobs never fit it.
    'scaler:cpu': resourceCapSchema.parse({ maxCpu: 16 }),
  },
});

for (const [job, spec] of Object.entries(podSpecs)) {
  const r = resolveResources(
    [spec, { requests: { cpus: 1, memory: '1Gi' } }],
    ['job', 'scaler'],
    k8s,
  );
  const gpus = r.requests.extended?.['nvidia.com/gpu'] ?? 0;
  const scope = gpus > 0 ? 'pool:gpu-box' : 'scaler:cpu';
  const answer = caps.tryReserve(job, [scope], r.requests);
  const what = `${formatCpu(r.requests.cpus, k8s)} cpu, ${formatMemory(r.requests.memBytes, k8s)}, ${gpus} gpu`;
  if (answer.ok) {
    console.log(`${job}: granted on ${scope} (${what})`);
  } else {
    console.log(
      `${job}: refused by ${answer.scope} on ${answer.dimension}: asked ${answer.requested}, ` +
        `${answer.used} held of ${answer.max}${answer.neverFits ? ' (never fits)' : ' (wait)'}`,
    );
  }
}

// A GPU job aimed at the CPU-only scaler: refused at once, naming the resource.
const misrouted = caps.tryReserve('misrouted', ['scaler:cpu'], {
  cpus: 1,
  memBytes: 0,
  extended: { 'nvidia.com/gpu': 1 },
});
console.log('misrouted:', JSON.stringify(misrouted));
console.log('gpu-box usage:', JSON.stringify(caps.usage('pool:gpu-box')));
