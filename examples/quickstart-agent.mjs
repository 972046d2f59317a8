// A pretend build agent for examples/01-quickstart.ts. Plain JavaScript, so it
// starts in a few tens of milliseconds with no loader. It registers with the
// dispatcher that forked it (over the IPC channel), runs the one job it is
// given (a sleep), reports it done and exits: an ephemeral agent.
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
