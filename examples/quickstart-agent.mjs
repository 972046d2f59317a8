// A pretend build agent for examples/01-quickstart.ts and examples/11-controller.ts.
// Plain JavaScript: with the installed package it starts in a few tens of
// milliseconds with no loader (from a clone the examples start it under tsx,
// which maps the package name to src/).
//
// The examples start it with ProcessBackend (scaler-primitives/process): a
// detached process with its output in a log file, which outlives a controller
// restart. So it reaches its dispatcher over HTTP, at the loopback address the
// dispatcher put in DISPATCHER_URL, under the id the backend put in
// SCALER_AGENT_ID. It registers (the answer is its job, once the dispatcher has
// one for it), runs that job (a sleep), reports it done and exits: an
// ephemeral agent.
//
// It fences itself: when its backend passed the controller's leases
// (SCALER_LEASE, from `leaseEnv(request.leases)`; ProcessBackend does by
// default), it stops before the first of them lapses, so an agent whose
// controller was killed or stalled is gone before another controller may be
// given its capacity (docs/fence.md). The examples' pool is a MachineLedger (a
// lease file): the dependency-free fence reads it. An agent whose pools may be
// on NATS calls `await watchLeasesFromEnv({ servers })` of
// 'scaler-primitives/fence/nats' instead, which reads file and NATS leases alike.
import { watchLeaseFromEnv } from 'scaler-primitives/fence';

watchLeaseFromEnv();

const agentId = process.env.SCALER_AGENT_ID;
const labels = (process.env.SCALER_LABELS ?? '').split(',');
const dispatcher = process.env.DISPATCHER_URL;

if (!agentId || !dispatcher) {
  console.error(
    'quickstart-agent: start me with ProcessBackend (SCALER_AGENT_ID) and DISPATCHER_URL set',
  );
  process.exit(2);
}

/** POST `body` to the dispatcher's `/<what>` and answer its JSON reply. */
async function call(what, body, signal) {
  const response = await fetch(`${dispatcher}/${what}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ agentId, ...body }),
    signal,
  });
  if (!response.ok) throw new Error(`${what}: the dispatcher answered HTTP ${response.status}`);
  return response.json();
}

// Registering waits for a job. An agent nobody gives a job to does not linger.
const job = await call('register', { labels }, AbortSignal.timeout(30_000)).catch((error) => {
  if (error?.name === 'TimeoutError') process.exit(0);
  throw error;
});
if (job === null) process.exit(0); // the dispatcher has nothing for it
await new Promise((resolve) => setTimeout(resolve, job.ms));
await call('done', { jobId: job.jobId });
process.exit(0);
