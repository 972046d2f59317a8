/**
 * Cap features: a pool document lists in `capFeatures` the cap features its
 * cap uses beyond the baseline fields, and a writer that does not know one
 * refuses the pool (ERR_LEDGER_CAP_MISMATCH naming the feature and the
 * features it knows) instead of granting past a limit it cannot read. Baseline
 * documents carry no such field (byte for byte what kici writes). Pure checks
 * of the codec and the table of cap fields, then the file ledger on a temp dir:
 * reserve, tryReserve, adopt, release (both paths), reap, list and getUsage are
 * refused and the pool file is left as it was.
 */
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ErrorCode, isScalerError } from 'scaler-primitives';
import { resourceCapSchema } from 'scaler-primitives/resources';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  emptyDocument,
  parseDocument,
  serializeDocument,
} from '../../src/ledger/document/codec.js';
import type { LedgerOp } from '../../src/ledger/ops.js';
import { decodeReply, decodeRequest, encodeRequest } from '../../src/ledger/wire.js';
import {
  CAP_FIELD_NAMES,
  CAP_FIELDS,
  KNOWN_CAP_FEATURES,
  SCALAR_DIMENSIONS,
} from '../../src/resources/cap-fields.js';
import { ledgerFactory } from '../helpers/machine-ledger.js';

const source = { pool: 'p', location: '/tmp/p.json' };

/** A pool document whose cap uses a feature no copy of the library knows. */
function futureDocument(features: unknown = ['example-future-cap']) {
  return {
    version: 1,
    cap: { maxCpu: 4, exampleFutureCap: 2 },
    capFeatures: features,
    reservations: [
      {
        instanceId: 'other',
        pid: 1,
        bootId: 'boot-1',
        agentId: 'held',
        cpus: 1,
        memBytes: 0,
        reservedAt: 1,
      },
    ],
  };
}

function refusedForFeature(error: unknown, feature = 'example-future-cap'): boolean {
  return (
    isScalerError(error, ErrorCode.LEDGER_CAP_MISMATCH) &&
    error.message.includes(JSON.stringify(feature)) &&
    error.message.includes('knows the baseline cap fields and these features: none')
  );
}

describe('the table of cap fields', () => {
  it('lists every field of a cap once, in the order documents write them; today every field is baseline', () => {
    expect(CAP_FIELD_NAMES).toEqual([
      'maxCpu',
      'maxMemoryBytes',
      'maxExtended',
      'provides',
      'maxAgents',
      'devices',
    ]);
    expect(KNOWN_CAP_FEATURES).toEqual([]);
    expect(SCALAR_DIMENSIONS).toEqual(['cpu', 'memory', 'agents']);
  });

  it('the config schema reads every field of the table', () => {
    const full = {
      maxCpu: 4,
      maxMemoryBytes: 1024,
      maxExtended: { 'example.com/fpga': 1 },
      provides: ['example.com/scratch'],
      maxAgents: 3,
      devices: { 'nvidia.com/gpu': ['0', '1'] },
    };
    expect(Object.keys(full).sort()).toEqual([...CAP_FIELD_NAMES].sort());
    expect(Object.keys(resourceCapSchema.parse(full)).sort()).toEqual([...CAP_FIELD_NAMES].sort());
  });

  it('the wire carries a cap with every field, and a refusal on every dimension of the table', () => {
    const cap = {
      maxCpu: 4,
      maxMemoryBytes: 1024,
      maxExtended: { 'example.com/fpga': 1 },
      provides: ['example.com/scratch'],
      maxAgents: 3,
      devices: { 'nvidia.com/gpu': ['0', '1'] },
    };
    const ops: LedgerOp[] = [{ kind: 'reap' }];
    const request = decodeRequest(new TextEncoder().encode(encodeRequest({ pool: 'p', cap, ops })));
    expect(Object.keys(request.cap).sort()).toEqual([...CAP_FIELD_NAMES].sort());

    const row = {
      instanceId: 'me',
      pid: 1,
      bootId: 'b',
      agentId: 'a',
      cpus: 1,
      memBytes: 0,
      reservedAt: 1,
      leaseId: 'l',
    };
    const dimensions = Object.values(CAP_FIELDS).map((field) =>
      field.dimension === 'extended' ? 'nvidia.com/gpu' : field.dimension,
    );
    for (const dimension of dimensions) {
      const refusal = {
        ok: false,
        pool: 'p',
        dimension,
        requested: 1,
        used: 0,
        max: 0,
        neverFits: true,
      };
      const reply = JSON.stringify({
        v: 1,
        kind: 'answers',
        answers: [{ ok: true, value: refusal }],
      });
      const decoded = decodeReply(new TextEncoder().encode(reply), 'p', [{ kind: 'reserve', row }]);
      // The decoded answer is tagged with the kind of call it answers.
      expect(decoded).toEqual({
        kind: 'answers',
        answers: [{ ok: true, kind: 'reserve', value: refusal }],
      });
    }
  });

  it('a forwarded cap with a field the table does not know is refused', () => {
    const cap = { maxCpu: 4, exampleFutureCap: 2 };
    const data = new TextEncoder().encode(
      JSON.stringify({ v: 1, pool: 'p', cap, ops: [{ kind: 'reap' }] }),
    );
    expect(() => decodeRequest(data)).toThrow(/cap has an unknown key "exampleFutureCap"/);
  });
});

describe('capFeatures in the pool document', () => {
  it('a baseline document has no capFeatures field: byte for byte the kici shape', () => {
    for (const cap of [
      {},
      { maxCpu: 4, maxMemoryBytes: 8 },
      { provides: ['a.io/b'], maxAgents: 2 },
    ]) {
      const doc = emptyDocument(cap);
      expect('capFeatures' in doc).toBe(false);
      expect(serializeDocument(doc)).toBe(
        `${JSON.stringify({ version: 1, cap, reservations: [] }, null, 2)}\n`,
      );
    }
    expect(serializeDocument(emptyDocument({ maxCpu: 4, maxMemoryBytes: 8 }))).toBe(
      '{\n  "version": 1,\n  "cap": {\n    "maxCpu": 4,\n    "maxMemoryBytes": 8\n  },\n  "reservations": []\n}\n',
    );
  });

  it('a document listing only known features (none today: an empty list) is read', () => {
    const doc = parseDocument(JSON.stringify(futureDocument([])), source);
    expect(doc.capFeatures).toEqual([]);
  });

  it('a document listing an unknown feature is refused, naming it and the known features', () => {
    let caught: unknown;
    try {
      parseDocument(JSON.stringify(futureDocument()), source);
    } catch (error) {
      caught = error;
    }
    expect(refusedForFeature(caught)).toBe(true);
    expect((caught as Error).message).toContain('Pool "p" at /tmp/p.json');
    expect((caught as { stored: unknown }).stored).toEqual({ maxCpu: 4, exampleFutureCap: 2 });
  });

  it('a capFeatures that is not a list of strings is corrupt', () => {
    for (const features of ['example-future-cap', [1], {}]) {
      expect(() => parseDocument(JSON.stringify(futureDocument(features)), source)).toThrow(
        expect.objectContaining({ code: ErrorCode.LEDGER_CORRUPT }),
      );
    }
  });
});

describe('the file ledger refuses a pool that uses an unknown cap feature', () => {
  let dir: string;
  const ledgers = ledgerFactory(() => dir);
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'ledger-cap-features-'));
  });
  afterEach(async () => {
    await ledgers.closeAll();
    rmSync(dir, { recursive: true, force: true });
  });

  it.each([
    ['reserve', (l: ReturnType<typeof ledgers.make>) => l.reserve('p', 'x', 1, 0)],
    ['tryReserve', (l: ReturnType<typeof ledgers.make>) => l.tryReserve('p', 'x', 1, 0)],
    [
      'adopt',
      (l: ReturnType<typeof ledgers.make>) =>
        l.adopt('p', [{ agentId: 'held', cpus: 1, memBytes: 0 }]),
    ],
    ['release', (l: ReturnType<typeof ledgers.make>) => l.release('p', 'held')],
    [
      'release (operator path)',
      (l: ReturnType<typeof ledgers.make>) => l.release('p', 'held', { anyInstance: true }),
    ],
    ['reapStale', (l: ReturnType<typeof ledgers.make>) => l.reapStale('p')],
    ['list', (l: ReturnType<typeof ledgers.make>) => l.list('p')],
    ['getUsage', (l: ReturnType<typeof ledgers.make>) => l.getUsage('p')],
  ])('%s is refused and the pool file is left as it was', async (_name, call) => {
    const file = join(dir, 'p.json');
    const text = `${JSON.stringify(futureDocument(), null, 2)}\n`;
    writeFileSync(file, text, { mode: 0o600 });
    const before = statSync(file);
    const ledger = ledgers.make();
    ledger.registerPool('p', { maxCpu: 4 });

    let caught: unknown;
    await call(ledger).then(
      (value) => {
        caught = { resolved: value };
      },
      (error) => {
        caught = error;
      },
    );
    expect(caught).toBeInstanceOf(Error);
    expect(refusedForFeature(caught)).toBe(true);
    expect(readFileSync(file, 'utf8')).toBe(text);
    const after = statSync(file);
    expect(after.ino).toBe(before.ino);
    expect(after.mtimeMs).toBe(before.mtimeMs);
  });

  it('a pool whose document lists no unknown feature is served as before', async () => {
    const file = join(dir, 'p.json');
    writeFileSync(
      file,
      `${JSON.stringify({ ...futureDocument([]), cap: { maxCpu: 4 } }, null, 2)}\n`,
      {
        mode: 0o600,
      },
    );
    const ledger = ledgers.make();
    ledger.registerPool('p', { maxCpu: 4 });
    expect(await ledger.reserve('p', 'x', 1, 0)).toEqual({ ok: true });
    expect(JSON.parse(readFileSync(file, 'utf8')).capFeatures).toEqual([]);
  });
});
