// A pretend build agent for examples/01-quickstart.ts. Plain JavaScript: with
// the installed package it starts in a few tens of milliseconds with no loader
// (from a clone the examples fork it under tsx, which maps the package name to
// src/). It registers with the
// dispatcher that forked it (over the IPC channel), runs the one job it is
// given (a sleep), reports it done and exits: an ephemeral agent.
//
// It fences itself: when its backend passed the controller's leases
// (SCALER_LEASE, from `leaseEnv(request.leases)`), it stops before the first
// of them lapses, so an agent whose controller was killed or stalled is gone
// before another controller may be given its capacity (docs/fence.md). The
// quickstart's pool is a MachineLedger (a lease file): the dependency-free
// fence reads it. An agent whose pools may be on NATS calls
// `await watchLeasesFromEnv({ servers })` of 'scaler-primitives/fence/nats'
// instead, which reads file and NATS leases alike.
import { watchLeaseFromEnv } from 'scaler-primitives/fence';

watchLeaseFromEnv();

const agentId = process.env.AGENT_ID;
const labels = JSON.parse(process.env.AGENT_LABELS ?? '[]');

if (typeof process.send !== 'function') {
  console.error('quickstart-agent: start me with child_process.fork (I talk over IPC)');
  process.exit(2);
}

// An agent nobody gives a job to does not linger.
const idle = setTimeout(() => process.exit(0), 30_000);

process.on('message', (message) => {
  if (message?.type !== 'run') return;
  clearTimeout(idle);
  setTimeout(() => {
    process.send({ type: 'done', agentId, jobId: message.jobId }, () => process.exit(0));
  }, message.ms);
});

process.send({ type: 'register', agentId, labels });
