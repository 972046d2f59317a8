import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { isInvalidInputError } from '../../src/errors/input.js';
import { isDuplicateReservationError } from '../../src/errors/resources.js';
import { isConnectionClosed } from '../../src/internal/nats-errors.js';
import { emptyDocument } from '../../src/ledger/document/codec.js';
import { sumRows } from '../../src/ledger/document/fit.js';
import { CasWriter, DuplicateWriteError, isRevisionConflict } from '../../src/ledger/nats/cas.js';
import { instanceKey, leaseKey, poolKey } from '../../src/ledger/nats/keys.js';
import {
  foreignLeases,
  leaseVerdict,
  partitionByLease,
  ServerClock,
} from '../../src/ledger/nats/liveness.js';
import { applyBatch, type LedgerOp } from '../../src/ledger/ops.js';
import type { LedgerDocument, ReservationRow } from '../../src/ledger/types.js';
import { decodeReply, decodeRequest, encodeReply, encodeRequest } from '../../src/ledger/wire.js';

function row(agentId: string, extra: Partial<ReservationRow> = {}): ReservationRow {
  return {
    instanceId: 'i1',
    pid: 1,
    bootId: 'b',
    agentId,
    cpus: 1,
    memBytes: 0,
    reservedAt: 1000,
    leaseId: 'L1',
    ...extra,
  };
}

describe('keys', () => {
  it('names pool and lease keys', () => {
    expect(poolKey('gpu-pool_1.eu')).toBe('pool.gpu-pool_1.eu');
    expect(leaseKey('abc')).toBe('lease.abc');
    // Any instance id fits a key: its hash names it, the same for the same id.
    expect(instanceKey('orchestrator-eu-1')).toMatch(/^instance\.[0-9a-f]{32}$/);
    expect(instanceKey('ü ci/host:1 *')).toMatch(/^instance\.[0-9a-f]{32}$/);
    expect(instanceKey('a')).toBe(instanceKey('a'));
    expect(instanceKey('a')).not.toBe(instanceKey('b'));
  });
  it.each(['.a', 'a.', 'a..b', '', '..', 'a b', 'a/b', 'x'.repeat(129)])(
    'refuses pool name %j',
    (name) => {
      let error: unknown;
      try {
        poolKey(name);
      } catch (e) {
        error = e;
      }
      expect(isInvalidInputError(error)).toBe(true);
      expect((error as Error).message).toContain(JSON.stringify(name));
    },
  );
});

describe('nats errors', () => {
  // nats.js JetStreamApiError: a numeric code next to an apiError() method.
  const apiError = (code: number) =>
    Object.assign(new Error(`api ${code}`), {
      name: 'JetStreamApiError',
      code,
      apiError: () => ({}),
    });
  it.each([
    ['wrong last sequence (10071)', apiError(10071), true],
    ['wrong last sequence, unknown (10164)', apiError(10164), true],
    ['a conflict as the cause', new Error('wrapped', { cause: apiError(10164) }), true],
    ['another writer from the same revision won', new DuplicateWriteError('pool.p', 7), true],
    ['another JetStream error', apiError(10058), false],
    ['a timeout', Object.assign(new Error('timeout'), { name: 'TimeoutError' }), false],
    ['nothing', undefined, false],
  ])('isRevisionConflict: %s is %s', (_, error, expected) => {
    expect(isRevisionConflict(error)).toBe(expected);
  });
  it('recognizes a closed connection', () => {
    const closed = Object.assign(new Error('closed'), { name: 'ClosedConnectionError' });
    expect(isConnectionClosed(closed)).toBe(true);
    expect(isConnectionClosed(new Error('x', { cause: closed }))).toBe(true);
    expect(isConnectionClosed(new Error('timeout'))).toBe(false);
  });
});

describe('lease verdicts', () => {
  const states: Record<string, 'fresh' | 'expired' | 'unknown'> = {
    L2: 'fresh',
    L3: 'expired',
    L4: 'unknown',
  };
  const facts = { ownLeaseId: 'L1', leaseState: (id: string) => states[id] ?? 'unknown' };

  it.each([
    ['own lease', row('a'), false],
    ['fresh peer lease', row('a', { leaseId: 'L2' }), false],
    ['expired peer lease', row('a', { leaseId: 'L3' }), true],
    ['unknown peer lease (kept)', row('a', { leaseId: 'L4' }), false],
    ['no lease (kept)', row('a', { leaseId: undefined }), false],
    // Boot ids and pids say nothing across hosts.
    ['another boot id, fresh lease', row('a', { leaseId: 'L2', bootId: 'other' }), false],
  ])('%s', (_, r, stale) => {
    expect(leaseVerdict(r, facts).stale).toBe(stale);
  });

  it('partitions in order and lists foreign leases once', () => {
    const rows = [
      row('a'),
      row('b', { leaseId: 'L3' }),
      row('c', { leaseId: 'L2' }),
      row('d', { leaseId: 'L3' }),
    ];
    const { live, stale } = partitionByLease(rows, facts);
    expect(live.map((r) => r.agentId)).toEqual(['a', 'c']);
    expect(stale.map((s) => [s.row.agentId, s.reason])).toEqual([
      ['b', 'lease-expired'],
      ['d', 'lease-expired'],
    ]);
    expect(foreignLeases(rows, 'L1')).toEqual(['L3', 'L2']);
  });
});

describe('ServerClock', () => {
  it('is undefined before an anchor, then advances with the monotonic clock', () => {
    let mono = 100;
    const clock = new ServerClock(() => mono);
    expect(clock.now()).toBeUndefined();
    clock.anchor(5_000_000, 100);
    mono = 350;
    expect(clock.now()).toBe(5_000_250);
    // An older server timestamp never moves the anchor back.
    clock.anchor(4_000_000, 350);
    expect(clock.now()).toBe(5_000_250);
    clock.anchor(5_000_400, 350);
    expect(clock.now()).toBe(5_000_400);
  });

  it('bounds the server time from above by the send times, never below the lower bound', () => {
    let mono = 1000;
    const clock = new ServerClock(() => mono);
    expect(clock.upperNow()).toBeUndefined();
    // Sent at 1000, stamped 9_000_000 by the server, acknowledged at 3000 (a slow answer):
    // the server's time now lies between 9_000_000 + (now - 3000) and 9_000_000 + (now - 1000).
    clock.anchor(9_000_000, 3000, 1000);
    mono = 4000;
    expect(clock.now()).toBe(9_001_000);
    expect(clock.upperNow()).toBe(9_003_000);
    // A quicker answer later narrows both bounds (the server's time is 4000 + 8_998_500 here).
    clock.anchor(9_002_450, 4000, 3900);
    expect(clock.upperNow()).toBe(9_002_550);
    expect(clock.now()).toBe(9_002_450);
    expect(clock.upperNow()!).toBeGreaterThanOrEqual(clock.now()!);
  });
});

describe('applyBatch', () => {
  const cap = { maxCpu: 3 };
  const noStale = (doc: LedgerDocument) => ({ live: doc.reservations, stale: [] });

  it('grants in order until the cap, then refuses without a write', () => {
    const doc = emptyDocument(cap);
    const ops: LedgerOp[] = ['a', 'b', 'c', 'd'].map((id) => ({ kind: 'reserve', row: row(id) }));
    const out = applyBatch('p', doc, noStale(doc), ops);
    expect(out.answers.map((a) => (a.ok ? (a.value as { ok: boolean }).ok : 'error'))).toEqual([
      true,
      true,
      true,
      false,
    ]);
    expect(out.dirty).toBe(true);
    expect(out.doc.reservations.map((r) => r.agentId)).toEqual(['a', 'b', 'c']);
    const full = applyBatch('p', out.doc, noStale(out.doc), [{ kind: 'reserve', row: row('e') }]);
    expect(full.dirty).toBe(false);
  });

  it('refuses a duplicate, unless it is our own write that may have landed', () => {
    const doc = { ...emptyDocument(cap), reservations: [row('a')] };
    const dup = applyBatch('p', doc, noStale(doc), [
      { kind: 'reserve', row: row('a', { reservedAt: 2000 }) },
    ]);
    expect(dup.answers[0]!.ok).toBe(false);
    expect(isDuplicateReservationError((dup.answers[0] as { error: unknown }).error)).toBe(true);
    const again = applyBatch('p', doc, noStale(doc), [
      { kind: 'reserve', row: row('a'), maybeApplied: true },
    ]);
    expect(again.answers[0]).toEqual({ ok: true, kind: 'reserve', value: { ok: true } });
    expect(again.dirty).toBe(false);
    // Same agent, our lease, but another reservation time: still a duplicate.
    const other = applyBatch('p', doc, noStale(doc), [
      { kind: 'reserve', row: row('a', { reservedAt: 5 }), maybeApplied: true },
    ]);
    expect(other.answers[0]!.ok).toBe(false);
  });

  it('release answers true once removed, also when the removing write had no answer', () => {
    const doc = { ...emptyDocument(cap), reservations: [row('a')] };
    const op: LedgerOp = { kind: 'release', agentId: 'a' };
    const first = applyBatch('p', doc, noStale(doc), [op]);
    expect(first.answers[0]).toEqual({ ok: true, kind: 'release', value: true });
    // The write had no answer but landed: the re-read no longer has the row.
    op.maybeApplied = true;
    const retry = applyBatch('p', first.doc, noStale(first.doc), [op]);
    expect(retry.answers[0]).toEqual({ ok: true, kind: 'release', value: true });
    expect(retry.dirty).toBe(false);
    expect(
      applyBatch('p', first.doc, noStale(first.doc), [{ kind: 'release', agentId: 'a' }])
        .answers[0],
    ).toEqual({ ok: true, kind: 'release', value: false });
  });

  it('drops stale rows from what it writes and counts them on reap', () => {
    const doc = { ...emptyDocument(cap), reservations: [row('a'), row('b', { leaseId: 'dead' })] };
    const partition = {
      live: [doc.reservations[0]!],
      stale: [{ row: doc.reservations[1]!, reason: 'lease-expired' as const }],
    };
    const refusal = applyBatch('p', doc, partition, [
      { kind: 'reserve', row: row('c', { cpus: 5 }) },
    ]);
    expect(refusal.dirty).toBe(false);
    const reap = applyBatch('p', doc, partition, [{ kind: 'reap' }]);
    expect(reap.answers[0]).toEqual({ ok: true, kind: 'reap', value: 1 });
    expect(reap.dirty).toBe(true);
    expect(reap.doc.reservations.map((r) => r.agentId)).toEqual(['a']);
    const release = applyBatch('p', doc, partition, [{ kind: 'release', agentId: 'b' }]);
    expect(release.answers[0]).toEqual({ ok: true, kind: 'release', value: true });
    expect(release.dirty).toBe(true);
  });

  it("release with an instanceId removes only that instance's row, live or stale", () => {
    const doc = { ...emptyDocument(cap), reservations: [row('a'), row('b', { leaseId: 'dead' })] };
    const partition = {
      live: [doc.reservations[0]!],
      stale: [{ row: doc.reservations[1]!, reason: 'lease-expired' as const }],
    };
    const release = (agentId: string, instanceId: string) =>
      applyBatch('p', doc, partition, [{ kind: 'release', agentId, instanceId }]);
    expect(release('a', 'i2').answers[0]).toEqual({ ok: true, kind: 'release', value: false });
    expect(release('a', 'i2').doc.reservations.map((r) => r.agentId)).toEqual(['a']);
    expect(release('b', 'i2').answers[0]).toEqual({ ok: true, kind: 'release', value: false });
    expect(release('a', 'i1').answers[0]).toEqual({ ok: true, kind: 'release', value: true });
    expect(release('a', 'i1').doc.reservations).toEqual([]);
    expect(release('b', 'i1').answers[0]).toEqual({ ok: true, kind: 'release', value: true });
  });

  it('releaseInstance removes only that instance', () => {
    const doc = { ...emptyDocument(cap), reservations: [row('a'), row('b', { instanceId: 'i2' })] };
    const out = applyBatch('p', doc, noStale(doc), [{ kind: 'releaseInstance', instanceId: 'i1' }]);
    expect(out.doc.reservations.map((r) => r.agentId)).toEqual(['b']);
  });

  it('never writes a document over the cap (property)', () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.oneof(
            fc.record({
              kind: fc.constant('reserve' as const),
              agent: fc.integer({ min: 0, max: 9 }),
              milli: fc.integer({ min: 0, max: 3000 }),
            }),
            fc.record({
              kind: fc.constant('release' as const),
              agent: fc.integer({ min: 0, max: 9 }),
            }),
          ),
          { maxLength: 40 },
        ),
        (script) => {
          let doc = emptyDocument({ maxCpu: 4 });
          for (const step of script) {
            const op: LedgerOp =
              step.kind === 'reserve'
                ? { kind: 'reserve', row: row(`a${step.agent}`, { cpus: step.milli / 1000 }) }
                : { kind: 'release', agentId: `a${step.agent}` };
            const out = applyBatch('p', doc, noStale(doc), [op]);
            if (out.dirty) doc = out.doc;
            expect(sumRows(doc.reservations).cpus).toBeLessThanOrEqual(4);
            expect(new Set(doc.reservations.map((r) => r.agentId)).size).toBe(
              doc.reservations.length,
            );
          }
        },
      ),
    );
  });
});

describe('CasWriter input', () => {
  // Refused before anything is sent: the client is never touched.
  const writer = new CasWriter({} as never, 'b', async () => 0);
  it.each([
    ['', 1, /`key` to be a non-empty string, got ``/],
    ['k', -1, /`revision` to be an integer >= 0, got `-1`/],
    ['k', 1.5, /got `1.5`/],
    ['k', Number.NaN, /got `NaN`/],
  ])('refuses key %j at revision %j', async (key, revision, message) => {
    await expect(writer.write(key, 'x', revision)).rejects.toThrow(message);
  });
});

describe('ServerClock.at', () => {
  it('is undefined before an anchor, then the server time at a local instant', () => {
    let local = 100;
    const clock = new ServerClock(() => local);
    expect(clock.at(50)).toBeUndefined();
    clock.anchor(10_000, 100);
    local = 150;
    expect(clock.at(120)).toBe(10_020);
    expect(clock.now()).toBe(10_050);
  });
});

describe('combine wire with device ids', () => {
  const GPU = 'nvidia.com/gpu';
  const encoder = new TextEncoder();

  it('a request keeps the cap device ids and the rows device ids', () => {
    const cap = { maxCpu: 4, devices: { [GPU]: ['0', '1'] } };
    const adoptRow = row('a-2', { extended: { [GPU]: 1 }, devices: { [GPU]: ['1'] } });
    const request = decodeRequest(
      encoder.encode(
        encodeRequest({
          pool: 'gpu',
          cap,
          ops: [
            { kind: 'reserve', row: row('a-1', { extended: { [GPU]: 1 } }), maybeApplied: true },
            { kind: 'adopt', rows: [adoptRow] },
          ],
        }),
      ),
    );
    expect(request.cap).toEqual({ maxCpu: 4, maxExtended: { [GPU]: 2 }, devices: cap.devices });
    expect(request.ops[1]).toEqual({ kind: 'adopt', rows: [adoptRow] });
  });

  it('refuses a request whose cap lists bad device ids', () => {
    const bad = (devices: unknown) =>
      encoder.encode(
        JSON.stringify({ v: 1, pool: 'gpu', cap: { devices }, ops: [{ kind: 'reap' }] }),
      );
    expect(() => decodeRequest(bad({ [GPU]: ['0', '0'] }))).toThrow(/listed twice/);
    expect(() => decodeRequest(bad({ [GPU]: [] }))).toThrow(/1 to 256 device ids/);
    expect(() => decodeRequest(bad({ [GPU]: ['a b'] }))).toThrow(/Invalid device id/);
  });

  const gpuRow = (agentId: string, gpus: number): ReservationRow => ({
    instanceId: 'i',
    pid: 1,
    bootId: 'b',
    agentId,
    cpus: 1,
    memBytes: 0,
    reservedAt: 1,
    extended: { [GPU]: gpus },
  });
  const replyOps: LedgerOp[] = [
    { kind: 'reserve', row: gpuRow('a', 2) },
    { kind: 'adopt', rows: [gpuRow('b', 1)] },
    { kind: 'release', agentId: 'c' },
    { kind: 'reap' },
  ];
  const reply = (answers: unknown[]) =>
    encoder.encode(JSON.stringify({ v: 1, kind: 'answers', answers }));

  it('a reply keeps the ids of each grant', () => {
    const answers = [
      {
        ok: true as const,
        kind: 'reserve' as const,
        value: { ok: true as const, devices: { [GPU]: ['1', '3'] } },
      },
      {
        ok: true as const,
        kind: 'adopt' as const,
        value: [{ ok: true as const, adopted: true, devices: { [GPU]: ['0'] } }],
      },
      { ok: true as const, kind: 'release' as const, value: true },
      { ok: true as const, kind: 'reap' as const, value: 0 },
    ];
    const decoded = decodeReply(
      encoder.encode(encodeReply({ kind: 'answers', answers })),
      'gpu',
      replyOps,
    );
    expect(decoded).toEqual({ kind: 'answers', answers });
  });

  it('refuses a reply whose answer does not have the shape of its call (ids that would reach a command line)', () => {
    const good = [
      { ok: true, value: { ok: true, devices: { [GPU]: ['1', '3'] } } },
      { ok: true, value: [{ ok: false, heldBy: 'other' }] },
      { ok: true, value: false },
      { ok: true, value: 2 },
    ];
    expect(decodeReply(reply(good), 'gpu', replyOps).kind).toBe('answers');
    const bad = (i: number, value: unknown) =>
      reply(good.map((answer, j) => (j === i ? { ok: true, value } : answer)));
    for (const [i, value, message] of [
      [0, { ok: true, devices: { [GPU]: ['1; reboot', '2'] } }, /Invalid device id/],
      [0, { ok: true, devices: { [GPU]: ['1'] } }, /1 ids for a request of 2/],
      [0, { ok: true, devices: { 'example.com/x': ['1', '2'] } }, /a request of 0/],
      [0, { ok: true, devices: { [GPU]: ['1', '1'] } }, /listed twice/],
      [0, { ok: true, admin: true }, /unknown key "admin"/],
      [
        0,
        {
          ok: false,
          pool: 'other',
          dimension: 'cpu',
          requested: 1,
          used: 0,
          max: 1,
          neverFits: false,
        },
        /another pool/,
      ],
      [
        0,
        {
          ok: false,
          pool: 'gpu',
          dimension: 'cpu',
          requested: -1,
          used: 0,
          max: 1,
          neverFits: false,
        },
        /not a number >= 0/,
      ],
      [0, 'granted', /neither a grant nor a refusal/],
      [1, { ok: true, adopted: true }, /one result per row/],
      [1, [{ ok: true, adopted: 'yes' }], /adopted is not a boolean/],
      [1, [{ ok: false, heldBy: '' }], /heldBy/],
      [2, 'true', /not a boolean/],
      [3, -1, /not a count/],
    ] as Array<[number, unknown, RegExp]>) {
      expect(() => decodeReply(bad(i, value), 'gpu', replyOps), JSON.stringify(value)).toThrow(
        message,
      );
    }
  });
});
