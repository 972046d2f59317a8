/**
 * The lease checks of poolLedgerConformance, for ledgers with the optional
 * `lease()` and `onLeaseEvent()`: what the lease says of itself, the events
 * when renewals fail (at risk before the deadline, lost at it, renewed after),
 * no row written under an unconfirmed lease, peers taking rows only after the
 * deadline plus the margin, and no instance judging others from its own
 * outage. The fault checks need the suite's `failRenewals` option; they run on
 * real time, so give the ledgers a short lease (a second or two).
 */
import { systemClock } from '../../../clock.js';
import type { LeaseEvent, LeaseInfo, PoolLedger } from '../../../ledger/types.js';
import { type ConformanceCheck, eventually, expectEqual, expectTrue, show } from '../check.js';
import type { CheckHarness, LedgerSuite } from './harness.js';

const LOCATION_KINDS = ['file', 'nats', 'memory'];

/** lease(), onLeaseEvent(), and (with `failRenewals`) their behaviour under failing renewals. */
export function leaseChecks({ check, failRenewals }: LedgerSuite): ConformanceCheck[] {
  const needLease = (h: CheckHarness, ledger: PoolLedger): (() => LeaseInfo) => {
    if (typeof ledger.lease !== 'function') {
      h.skip('the ledger has no lease() (optional in PoolLedger)');
    }
    return () => ledger.lease!();
  };
  const needEvents = (h: CheckHarness, ledger: PoolLedger) => {
    if (typeof ledger.onLeaseEvent !== 'function') {
      h.skip('the ledger has no onLeaseEvent() (optional in PoolLedger)');
    }
    const seen: Array<{ event: LeaseEvent; at: number }> = [];
    ledger.onLeaseEvent!((event) => seen.push({ event, at: systemClock.now() }));
    return seen;
  };
  const needFaults = (h: CheckHarness) => {
    if (failRenewals === undefined) {
      h.skip('the suite was given no `failRenewals` option to make renewals fail');
    }
    return failRenewals;
  };
  const waitFor = async (
    seen: Array<{ event: LeaseEvent }>,
    type: LeaseEvent['type'],
    timeoutMs: number,
  ) => {
    await eventually(
      async () => seen.some((s) => s.event.type === type),
      timeoutMs,
      `no ${type} event within ${timeoutMs} ms (events: ${show(seen.map((s) => s.event.type))})`,
    );
  };

  return [
    check(
      'lease-info',
      "lease() describes the instance's own lease: held after a reserve, deadline = confirmedAt + leaseMs, the lease id in its rows, a location",
      async (h) => {
        const p = h.pool();
        const a = await h.open('a');
        const lease = needLease(h, a);
        a.registerPool(p, { maxCpu: 2 });
        expectEqual(await a.reserve(p, 'x', 1, 0), { ok: true }, 'reserve x');
        const info = lease();
        expectEqual(info.health, 'held', 'health after a reserve');
        expectTrue(
          typeof info.leaseId === 'string' && info.leaseId !== '',
          `leaseId: expected a non-empty string, got ${show(info.leaseId)}`,
        );
        expectTrue(
          Number.isFinite(info.leaseMs) && info.leaseMs > 0,
          `leaseMs: expected a finite number > 0, got ${show(info.leaseMs)}`,
        );
        expectTrue(
          Number.isFinite(info.marginMs) && info.marginMs >= 0,
          `marginMs: expected a finite number >= 0, got ${show(info.marginMs)}`,
        );
        expectTrue(
          typeof info.confirmedAt === 'number',
          `confirmedAt after a reserve: expected a number, got ${show(info.confirmedAt)}`,
        );
        expectEqual(info.deadline, info.confirmedAt! + info.leaseMs, 'deadline');
        expectTrue(
          LOCATION_KINDS.includes(info.location?.kind),
          `location.kind: expected one of ${LOCATION_KINDS.join(', ')}, got ${show(info.location)}`,
        );
        if (info.location.kind === 'file') {
          expectTrue(
            typeof info.location.path === 'string' && info.location.path.startsWith('/'),
            `location.path: expected an absolute path, got ${show(info.location.path)}`,
          );
        }
        if (info.location.kind === 'nats') {
          expectTrue(
            typeof info.location.bucket === 'string' && typeof info.location.key === 'string',
            `location: expected a bucket and a key, got ${show(info.location)}`,
          );
        }
        const [row] = await a.list(p);
        if (row?.leaseId !== undefined) {
          expectEqual(row.leaseId, info.leaseId, "the row's leaseId");
        }
      },
    ),

    check(
      'lease-listener',
      'onLeaseEvent returns a remover that may be called twice; a healthy lease fires no event',
      async (h) => {
        const p = h.pool();
        const a = await h.open('a');
        needLease(h, a);
        const seen = needEvents(h, a);
        const remove = a.onLeaseEvent!(() => {
          throw new Error('a listener that throws');
        });
        expectEqual(typeof remove, 'function', 'what onLeaseEvent returns');
        remove();
        remove();
        a.registerPool(p, { maxCpu: 2 });
        expectEqual(await a.reserve(p, 'x', 1, 0), { ok: true }, 'reserve x');
        expectEqual(await a.release(p, 'x'), true, 'release x');
        expectEqual(
          seen.map((s) => s.event.type),
          [],
          'events of a healthy lease',
        );
      },
    ),

    check(
      'lease-events',
      'renewals that fail: lease-at-risk before the deadline, lease-lost at it, each once; no row written meanwhile; lease-renewed when they work again',
      async (h) => {
        const p = h.pool();
        const a = await h.open('a');
        const lease = needLease(h, a);
        const seen = needEvents(h, a);
        const fail = needFaults(h)!;
        a.registerPool(p, { maxCpu: 2 });
        expectEqual(await a.reserve(p, 'x', 1, 0), { ok: true }, 'reserve x');
        const { leaseMs } = lease();
        await fail(a, true);
        const before = lease().deadline!;
        await waitFor(seen, 'lease-at-risk', leaseMs + 2000);
        const risk = seen.find((s) => s.event.type === 'lease-at-risk')!;
        expectEqual(risk.event.lease.health, 'at-risk', 'health in the lease-at-risk event');
        expectTrue(
          risk.at < risk.event.lease.deadline!,
          `lease-at-risk came at ${risk.at}, not before the deadline ${risk.event.lease.deadline}`,
        );
        expectTrue(
          risk.event.lease.deadline! >= before,
          `the deadline went back from ${before} to ${risk.event.lease.deadline}`,
        );
        let written = false;
        try {
          written = (await a.reserve(p, 'y', 1, 0)).ok;
        } catch {
          // refused: the lease is not confirmed
        }
        expectEqual(written, false, 'a reserve under an at-risk lease was granted');
        await waitFor(seen, 'lease-lost', leaseMs + 2000);
        const lost = seen.find((s) => s.event.type === 'lease-lost')!;
        expectEqual(lost.event.lease.health, 'lost', 'health in the lease-lost event');
        expectTrue(
          lost.at >= lost.event.lease.deadline!,
          `lease-lost came at ${lost.at}, before the deadline ${lost.event.lease.deadline}`,
        );
        await fail(a, false);
        await waitFor(seen, 'lease-renewed', leaseMs + 2000);
        const renewed = seen.find((s) => s.event.type === 'lease-renewed')!;
        expectEqual(renewed.event.lease.health, 'held', 'health in the lease-renewed event');
        expectEqual(
          seen.map((s) => s.event.type),
          ['lease-at-risk', 'lease-lost', 'lease-renewed'],
          'the events, in order, each once',
        );
        expectEqual(lease().health, 'held', 'health once renewals work again');
        // Read once the store is reachable again: a ledger cut off from it cannot list.
        expectEqual(
          (await a.list(p)).map((r) => r.agentId),
          ['x'],
          'rows after the outage: the refused reserve wrote nothing',
        );
      },
    ),

    check(
      'lease-peers',
      "a peer takes the rows of an instance whose renewals fail only after that instance's deadline plus the margin",
      async (h) => {
        const p = h.pool();
        const [a, b] = await h.pair(p, { maxCpu: 2 });
        const lease = needLease(h, a);
        const fail = needFaults(h)!;
        expectEqual(await a.reserve(p, 'x', 2, 0), { ok: true }, 'a reserves the whole pool');
        await fail(a, true);
        const { deadline, marginMs, leaseMs } = lease();
        let reapedAt = 0;
        await eventually(
          async () => {
            if ((await b.reapStale(p)) > 0) reapedAt = systemClock.now();
            return reapedAt > 0;
          },
          2 * leaseMs + marginMs + 2000,
          `b never took the rows of a, whose renewals failed (deadline ${deadline}, margin ${marginMs} ms)`,
        );
        expectTrue(
          reapedAt >= deadline! + marginMs,
          `b took a's rows at ${reapedAt}, before a's deadline plus the margin (${deadline! + marginMs})`,
        );
        expectEqual(await b.reserve(p, 'y', 2, 0), { ok: true }, 'b reserves the freed pool');
        await fail(a, false);
      },
    ),

    check(
      'lease-own-outage',
      'no instance judges others from its own outage: after an outage of both, longer than the lease, a peer keeps the rows of an instance that renews again',
      async (h) => {
        const p = h.pool();
        const [a, b] = await h.pair(p, { maxCpu: 2 });
        const lease = needLease(h, a);
        const fail = needFaults(h)!;
        expectEqual(await a.reserve(p, 'x', 2, 0), { ok: true }, 'a reserves the whole pool');
        const seen = needEvents(h, a);
        await fail(a, true);
        await fail(b, true);
        const { deadline, marginMs, leaseMs } = lease();
        await waitFor(seen, 'lease-lost', leaseMs + 2000);
        // Past a's deadline plus the margin, with both still cut off.
        await eventually(
          async () => systemClock.now() > deadline! + marginMs + 50,
          marginMs + 1000,
          'the wait past the margin did not end',
        );
        // A reap that fails (the store is unreachable for b too) reaps nothing either.
        expectEqual(
          await b.reapStale(p).catch(() => 0),
          0,
          'rows b reaps while its own renewals fail',
        );
        await fail(b, false);
        await fail(a, false);
        await waitFor(seen, 'lease-renewed', leaseMs + 2000);
        expectEqual(await b.reapStale(p), 0, 'rows b reaps once both renew again');
        expectEqual(
          (await b.list(p)).map((r) => r.agentId),
          ['x'],
          "a's row, kept through the outage",
        );
        expectEqual((await b.reserve(p, 'y', 1, 0)).ok, false, 'b reserves on top of a');
      },
    ),
  ];
}
