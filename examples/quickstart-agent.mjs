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
import { request } from 'node:http';
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

/** POST `body` as JSON to the dispatcher's `/<what>` and answer its JSON reply. */
function call(what, body) {
  return new Promise((resolve, reject) => {
    const post = request(`${dispatcher}/${what}`, { method: 'POST' }, (response) => {
      let text = '';
      response.setEncoding('utf8');
      response.on('data', (chunk) => {
        text += chunk;
      });
      response.on('end', () => {
        if (response.statusCode === 200) resolve(JSON.parse(text));
        else reject(new Error(`${what}: the dispatcher answered HTTP ${response.statusCode}`));
      });
    });
    post.once('error', reject);
    post.setHeader('content-type', 'application/json');
    post.end(JSON.stringify({ agentId, ...body }));
  });
}

// An agent nobody gives a job to does not linger.
const idle = setTimeout(() => process.exit(0), 30_000);
// Registering waits for a job (null: the dispatcher has none for it).
const job = await call('register', { labels });
clearTimeout(idle);
if (job === null) process.exit(0);
await new Promise((resolve) => setTimeout(resolve, job.ms));
await call('done', { jobId: job.jobId });
process.exit(0);
