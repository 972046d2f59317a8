/**
 * poolLedgerConformance against NatsPoolLedger constructed with default options
 * (leaseMs 30 s, the default margin and timeout), on a real nats-server the test
 * starts: a cleanly closed lease (the end marker in its heartbeat key) frees its
 * rows for any peer at once, however young, so no check waits for a lease to run
 * out. The checks that need failing renewals cut a client's connection and wait
 * out a lease: they run with short leases in test/testing/conformance-ledgers.test.ts.
 */
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { poolLedgerConformance } from 'scaler-primitives/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NatsPoolLedger } from '../../src/ledger/nats/nats-pool-ledger.js';
import { type NatsServer, startNatsServer } from '../helpers/nats-server.js';
import { hasSystem } from '../helpers/system.js';

/** The lease checks that need the suite's `failRenewals` option. */
const LEASE_FAULT_CHECKS = poolLedgerConformance(() => {
  throw new Error('not called');
})
  .map((check) => check.name)
  .filter((name) =>
    /^(renewals that fail|a peer takes the rows|no instance judges others)/.test(name),
  );

const natsOk = hasSystem(['nats-server'], 'poolLedgerConformance against nats-server (defaults)');

describe.runIf(natsOk)('poolLedgerConformance: NatsPoolLedger with default options', () => {
  let server: NatsServer;
  const connections: NatsConnection[] = [];
  beforeAll(async () => {
    server = await startNatsServer();
  });
  afterAll(async () => {
    await Promise.all(connections.map((c) => c.close().catch(() => {})));
    await server?.stop();
  });
  let hosts = 0;
  const checks = poolLedgerConformance(async ({ instanceId }) => {
    // One connection per instance, as separate processes would have, and a boot
    // id per instance as if each ran on a host of its own: the restart checks
    // open an instance id again while its first ledger still runs in this
    // process, which on one host is refused (LedgerInstanceInUseError). The
    // boot id is no timing option: leaseMs, the margin and timeoutMs are the defaults.
    const nc = await connect({ servers: server.url });
    connections.push(nc);
    return NatsPoolLedger.connect({ nc, instanceId, bootId: `conformance-host-${hosts++}` });
  });
  const withoutFaults = checks.filter((check) => !LEASE_FAULT_CHECKS.includes(check.name));
  it('the suite has the three lease checks that need failing renewals', () => {
    expect(LEASE_FAULT_CHECKS).toHaveLength(3);
    expect(checks.length - withoutFaults.length).toBe(3);
  });
  it('a ledger made with default options has the default 30 s lease', async () => {
    const nc = await connect({ servers: server.url });
    connections.push(nc);
    const ledger = await NatsPoolLedger.connect({ nc, instanceId: 'defaults-probe' });
    try {
      expect(ledger.lease().leaseMs).toBe(30_000);
    } finally {
      await ledger.close();
    }
  });
  for (const check of withoutFaults) {
    it(check.name, check.run, 120_000);
  }
});
