/**
 * Per-agent caps, as a controller publishes them and a host applies them:
 *
 * 1. turn a job's resources into systemd caps and encode them for the wire,
 * 2. see a value systemd would silently ignore refused before it goes anywhere,
 * 3. render the drop-in a host writes for the agent's unit,
 * 4. with NATS_URL set (a nats-server with JetStream), write the caps into the
 *    `agent-limits` bucket, read them back the way a host does (one direct get),
 *    and remove them again.
 *
 * Run: npx tsx examples/05-agent-caps.ts
 *      NATS_URL=nats://127.0.0.1:4222 npx tsx examples/05-agent-caps.ts
 */
import { ErrorCode, isScalerError } from 'scaler-primitives';
import {
  capsFromResources,
  decodeAgentCaps,
  directGetSubject,
  encodeAgentCaps,
  renderDropIn,
} from 'scaler-primitives/agent-caps';

const agent = 'example-agent';

// 1. A job asked for 3.5 cores and 6 GiB: the caps are whole percents and the
//    largest exact unit.
const caps = capsFromResources({ cpus: 3.5, memBytes: 6 * 1024 ** 3 });
const wire = new TextDecoder().decode(encodeAgentCaps(caps));
console.log('caps:', caps);
console.log('on the wire:', wire);
console.log('decoded by a host:', decodeAgentCaps(wire));

// 2. "8GB" is not systemd syntax: systemd would log a warning and run the agent
//    uncapped. It never reaches the wire.
try {
  encodeAgentCaps({ memoryMax: '8GB' });
} catch (error) {
  if (!isScalerError(error, ErrorCode.CAPS_VALUE)) throw error;
  console.log(`\nrefused: ${error.message}`);
}

// 3. What a host writes to e.g. /run/systemd/system/<unit>.scope.d/50-caps.conf
//    (then `systemctl daemon-reload`). Empty caps render nothing: remove the file.
console.log(`\ndrop-in for ${agent}:\n${renderDropIn(caps, { section: 'Scope' })}`);

// 4. Through NATS JetStream, when a server is given.
const url = process.env.NATS_URL;
if (url === undefined) {
  console.log('Set NATS_URL to write and read the caps through a nats-server with JetStream.');
} else {
  const { connect } = await import('@nats-io/transport-node');
  const { deleteAgentCaps, openOrCreateCapsBucket, readAgentCaps, writeAgentCaps } = await import(
    'scaler-primitives/agent-caps/nats'
  );
  const nc = await connect({ servers: url.split(',') }).catch((error: Error) => {
    console.error(
      `Cannot reach a NATS server at ${url} (${error.message}); start one with \`nats-server -js\` (Debian: apt-get install nats-server) or unset NATS_URL.`,
    );
    process.exit(1);
  });
  try {
    // Controller side: create the bucket if needed, publish the caps.
    const kv = await openOrCreateCapsBucket(nc);
    const revision = await writeAgentCaps(kv, agent, caps);
    console.log(`wrote the caps of ${agent} at revision ${revision}`);

    // Host side: one request on the subject its read-only grant allows.
    console.log(`host reads ${directGetSubject(agent)}`);
    const read = await readAgentCaps(nc, agent);
    console.log('host read:', read);

    await deleteAgentCaps(kv, agent);
    console.log('after delete:', await readAgentCaps(nc, agent));
  } finally {
    await nc.close();
  }
}
