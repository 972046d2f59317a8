import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { isInvalidInputError } from '../../src/errors/input.js';
import {
  isLedgerCapMismatchError,
  isLedgerCorruptError,
  type LedgerCorruptError,
} from '../../src/errors/ledger.js';
import { assertCap, capsEqual, normalizeCap } from '../../src/ledger/document/cap.js';
import {
  emptyDocument,
  parseDocument,
  serializeDocument,
} from '../../src/ledger/document/codec.js';
import { checkFit, sumRows } from '../../src/ledger/document/fit.js';
import { validatePoolName } from '../../src/ledger/document/pool-name.js';
import { addRow, removeRows } from '../../src/ledger/document/rows.js';
import {
  type LivenessFacts,
  partitionRows,
  rowVerdict,
} from '../../src/ledger/document/verdict.js';
import type { ReservationRow } from '../../src/ledger/types.js';

const source = { pool: 'gpu', location: '/var/lib/x/gpu.json' };

function row(overrides: Partial<ReservationRow> = {}): ReservationRow {
  return {
    instanceId: 'me',
    pid: 100,
    bootId: 'boot-1',
    agentId: 'a1',
    cpus: 1,
    memBytes: 1024,
    reservedAt: 1,
    ...overrides,
  };
}

function catchError(fn: () => unknown): unknown {
  try {
    fn();
  } catch (error) {
    return error;
  }
  throw new Error('expected a throw');
}

describe('validatePoolName', () => {
  it.each(['a', 'pool-1', 'A.b_c-9', 'x'.repeat(128), 'a...', '_x', '-x'])('accepts %j', (name) => {
    expect(validatePoolName(name)).toBe(name);
  });

  it.each([
    '',
    '.',
    '..',
    '...',
    '.hidden',
    '.p.queue',
    '../etc/x',
    'a/b',
    'a\\b',
    'nul\0byte',
    'x'.repeat(129),
    'space here',
    'é',
  ])('refuses %j with InvalidInputError naming it', (name) => {
    const error = catchError(() => validatePoolName(name));
    expect(isInvalidInputError(error)).toBe(true);
    expect((error as Error).message).toContain(JSON.stringify(name));
    expect((error as Error).message).toContain('A-Z');
  });

  it('throws TypeError for a non-string', () => {
    expect(() => validatePoolName(42)).toThrow(TypeError);
  });
});

describe('parseDocument', () => {
  it('parses a seed-format document', () => {
    const text = JSON.stringify({
      version: 1,
      cap: { maxCpu: 4, maxMemoryBytes: 8 },
      reservations: [row()],
    });
    expect(parseDocument(text, source)).toEqual({
      version: 1,
      cap: { maxCpu: 4, maxMemoryBytes: 8 },
      reservations: [row()],
    });
  });

  it('keeps unknown fields in the document, the cap and rows through a round trip', () => {
    const original = {
      version: 1,
      cap: { maxCpu: 2, future: 'x' },
      owner: { team: 'ci' },
      reservations: [row({ note: 'kept', nested: { a: [1, 2] } })],
    };
    const doc = parseDocument(JSON.stringify(original), source);
    const next = addRow(doc, row({ agentId: 'a2' }));
    const reparsed = JSON.parse(serializeDocument(next));
    expect(reparsed.owner).toEqual({ team: 'ci' });
    expect(reparsed.cap.future).toBe('x');
    expect(reparsed.reservations[0]).toEqual(original.reservations[0]);
    expect(reparsed.reservations).toHaveLength(2);
  });

  it.each([
    ['empty text', '', 'it is empty'],
    ['truncated JSON', '{"version":1,"cap":{', 'not valid JSON'],
    ['an array', '[]', 'not a JSON object'],
    ['null', 'null', 'not a JSON object'],
    ['unknown version', '{"version":2,"cap":{},"reservations":[]}', 'version is 2'],
    ['missing version', '{"cap":{},"reservations":[]}', 'version is missing'],
    [
      'string version',
      '{"version":"1","cap":{},"reservations":[]}',
      'version is not a number (a string)',
    ],
    ['missing reservations', '{"version":1,"cap":{}}', '`reservations`'],
    ['missing cap', '{"version":1,"reservations":[]}', '`cap`'],
    ['negative cap', '{"version":1,"cap":{"maxCpu":-1},"reservations":[]}', '`cap.maxCpu`'],
    [
      'row with string cpus',
      JSON.stringify({ version: 1, cap: {}, reservations: [row({ cpus: '1' as never })] }),
      '`reservations[0].cpus`',
    ],
    [
      'row without agentId',
      JSON.stringify({
        version: 1,
        cap: {},
        reservations: [row(), { ...row(), agentId: undefined }],
      }),
      '`reservations[1].agentId`',
    ],
    [
      'fractional pid',
      JSON.stringify({ version: 1, cap: {}, reservations: [row({ pid: 1.5 })] }),
      '`reservations[0].pid`',
    ],
    [
      'leaseId of the wrong type',
      JSON.stringify({ version: 1, cap: {}, reservations: [row({ leaseId: 7 as never })] }),
      '`reservations[0].leaseId`',
    ],
  ])('refuses %s with LedgerCorruptError naming the location and problem', (_name, text, part) => {
    const error = catchError(() => parseDocument(text, source)) as LedgerCorruptError;
    expect(isLedgerCorruptError(error)).toBe(true);
    expect(error.pool).toBe('gpu');
    expect(error.location).toBe(source.location);
    expect(error.message).toContain(source.location);
    expect(error.message).toContain(part);
  });
});

describe('caps', () => {
  it.each([
    [{}, {}, true],
    [{ maxCpu: 4 }, { maxCpu: 4 }, true],
    [{ maxCpu: 0.3 }, { maxCpu: 0.1 + 0.2 }, true],
    [{ maxCpu: 4 }, {}, false],
    [{}, { maxMemoryBytes: 1 }, false],
    [{ maxCpu: 4, maxMemoryBytes: 1 }, { maxCpu: 4, maxMemoryBytes: 2 }, false],
  ])('capsEqual(%j, %j) is %s', (a, b, expected) => {
    expect(capsEqual(a, b)).toBe(expected);
  });

  it('assertCap throws LedgerCapMismatchError naming both caps and the file', () => {
    const doc = emptyDocument({ maxCpu: 4 });
    const error = catchError(() => assertCap(doc, { maxCpu: 8 }, source));
    expect(isLedgerCapMismatchError(error)).toBe(true);
    expect((error as Error).message).toContain('maxCpu: 4');
    expect((error as Error).message).toContain('maxCpu: 8');
    expect((error as Error).message).toContain(source.location);
    expect(() => assertCap(doc, { maxCpu: 4 }, source)).not.toThrow();
  });

  it.each([{ maxCpu: -1 }, { maxCpu: Number.NaN }, { maxMemoryBytes: Infinity }, { maxCpu: '4' }])(
    'normalizeCap refuses %j with TypeError',
    (cap) => {
      expect(() => normalizeCap(cap as never)).toThrow(/Expected `cap\.max/);
    },
  );

  it('normalizeCap drops unknown fields', () => {
    expect(normalizeCap({ maxCpu: 1, extra: 2 } as never)).toEqual({ maxCpu: 1 });
  });
});

describe('rowVerdict', () => {
  const facts = (over: Partial<LivenessFacts> = {}): LivenessFacts => ({
    bootId: 'boot-1',
    instanceId: 'me',
    processState: () => 'alive',
    leaseState: () => 'fresh',
    ...over,
  });

  it('another boot id is stale whatever else is true', () => {
    expect(rowVerdict(row({ bootId: 'boot-0' }), facts())).toEqual({
      stale: true,
      reason: 'other-boot',
    });
    expect(rowVerdict(row({ bootId: 'boot-0', instanceId: 'peer' }), facts())).toEqual({
      stale: true,
      reason: 'other-boot',
    });
  });

  it.each([
    ['alive', { stale: false }],
    ['gone', { stale: true, reason: 'process-gone' }],
    ['reused', { stale: true, reason: 'pid-reused' }],
  ] as const)('same instance, process %s', (state, expected) => {
    expect(rowVerdict(row(), facts({ processState: () => state }))).toEqual(expected);
  });

  it('same instance never asks about the lease', () => {
    const verdict = rowVerdict(
      row({ leaseId: 'L' }),
      facts({
        leaseState: () => {
          throw new Error('asked');
        },
      }),
    );
    expect(verdict).toEqual({ stale: false });
  });

  it.each([
    ['fresh', { stale: false }],
    ['unknown', { stale: false }],
    ['expired', { stale: true, reason: 'lease-expired' }],
  ] as const)('peer row with a lease that is %s', (state, expected) => {
    const peer = row({ instanceId: 'peer', leaseId: 'L1' });
    let asked: string | undefined;
    const verdict = rowVerdict(
      peer,
      facts({
        leaseState: (id) => {
          asked = id;
          return state;
        },
      }),
    );
    expect(verdict).toEqual(expected);
    expect(asked).toBe('L1');
  });

  it('peer row without a lease keeps the seed rule: live, and the process is never probed', () => {
    const verdict = rowVerdict(
      row({ instanceId: 'peer' }),
      facts({
        processState: () => {
          throw new Error('probed');
        },
        leaseState: () => 'expired',
      }),
    );
    expect(verdict).toEqual({ stale: false });
  });

  it('partitionRows keeps document order and reasons', () => {
    const rows = [
      row({ agentId: 'a' }),
      row({ agentId: 'b', bootId: 'old' }),
      row({ agentId: 'c', instanceId: 'p', leaseId: 'x' }),
    ];
    const { live, stale } = partitionRows(rows, facts({ leaseState: () => 'expired' }));
    expect(live.map((r) => r.agentId)).toEqual(['a']);
    expect(stale.map((s) => [s.row.agentId, s.reason])).toEqual([
      ['b', 'other-boot'],
      ['c', 'lease-expired'],
    ]);
  });
});

describe('checkFit', () => {
  it('sums CPU in millicores: ten 0.1 rows fill a 1-core pool exactly', () => {
    const rows = Array.from({ length: 9 }, (_, i) => row({ agentId: `a${i}`, cpus: 0.1 }));
    expect(checkFit('p', rows, { maxCpu: 1 }, { cpus: 0.1, memBytes: 0 })).toEqual({ ok: true });
    const full = [...rows, row({ agentId: 'a9', cpus: 0.1 })];
    expect(checkFit('p', full, { maxCpu: 1 }, { cpus: 0.001, memBytes: 0 })).toMatchObject({
      ok: false,
      dimension: 'cpu',
      used: 1,
      max: 1,
    });
  });

  it('reports the refused dimension, CPU first, and neverFits', () => {
    const rows = [row({ cpus: 3, memBytes: 900 })];
    expect(
      checkFit('p', rows, { maxCpu: 4, maxMemoryBytes: 1000 }, { cpus: 2, memBytes: 200 }),
    ).toEqual({
      ok: false,
      pool: 'p',
      dimension: 'cpu',
      requested: 2,
      used: 3,
      max: 4,
      neverFits: false,
    });
    expect(
      checkFit('p', rows, { maxCpu: 4, maxMemoryBytes: 1000 }, { cpus: 1, memBytes: 200 }),
    ).toEqual({
      ok: false,
      pool: 'p',
      dimension: 'memory',
      requested: 200,
      used: 900,
      max: 1000,
      neverFits: false,
    });
    expect(checkFit('p', [], { maxMemoryBytes: 1000 }, { cpus: 1, memBytes: 1001 })).toMatchObject({
      neverFits: true,
    });
  });

  it('an absent cap field means no limit', () => {
    expect(checkFit('p', [row({ cpus: 1e6 })], {}, { cpus: 1e6, memBytes: 1e15 })).toEqual({
      ok: true,
    });
  });

  it('property: granted requests never sum past the cap', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 64_000 }),
        fc.array(fc.integer({ min: 0, max: 8_000 }), { maxLength: 60 }),
        (capMilli, requests) => {
          const cap = { maxCpu: capMilli / 1000 };
          let doc = emptyDocument(cap);
          for (const [i, milli] of requests.entries()) {
            const result = checkFit('p', doc.reservations, cap, {
              cpus: milli / 1000,
              memBytes: 0,
            });
            if (result.ok) doc = addRow(doc, row({ agentId: `a${i}`, cpus: milli / 1000 }));
            else expect(result.used * 1000 + milli).toBeGreaterThan(capMilli);
          }
          const total = doc.reservations.reduce((s, r) => s + Math.round(r.cpus * 1000), 0);
          expect(total).toBeLessThanOrEqual(capMilli);
          expect(Math.round(sumRows(doc.reservations).cpus * 1000)).toBe(total);
        },
      ),
    );
  });
});

describe('addRow / removeRows', () => {
  it('does not mutate its input', () => {
    const doc = emptyDocument({});
    const next = addRow(doc, row());
    expect(doc.reservations).toHaveLength(0);
    expect(next.reservations).toHaveLength(1);
  });

  it('removes by agent, optionally by instance, and reports what it removed', () => {
    const doc = addRow(addRow(emptyDocument({}), row()), row({ agentId: 'a2', instanceId: 'p' }));
    expect(removeRows(doc, { agentId: 'a2', instanceId: 'me' }).removed).toHaveLength(0);
    expect(removeRows(doc, { agentId: 'a2', instanceId: 'me' }).doc).toBe(doc);
    const { doc: next, removed } = removeRows(doc, { agentId: 'a2' });
    expect(removed.map((r) => r.instanceId)).toEqual(['p']);
    expect(next.reservations.map((r) => r.agentId)).toEqual(['a1']);
    expect(doc.reservations).toHaveLength(2);
  });
});
