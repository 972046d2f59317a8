/**
 * Extended resources and `maxAgents` through the real ledgers: `MachineLedger`
 * on a temp directory, `NatsPoolLedger` on a real nats-server. The row written
 * carries `extended`, the pool's `maxExtended` and `maxAgents` are enforced
 * across instances, and a kici-compatible pool refuses `maxAgents`.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type KV, Kvm } from '@nats-io/kv';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { isInvalidInputError } from '../../src/errors/input.js';
import { MachineLedger } from '../../src/ledger/file/machine-ledger.js';
import { NatsPoolLedger } from '../../src/ledger/nats/nats-pool-ledger.js';
import type { PoolLedger } from '../../src/ledger/types.js';
import { decodeRequest, encodeRequest } from '../../src/ledger/wire.js';
import { type NatsServer, startNatsServer } from '../helpers/nats-server.js';
import { hasSystem } from '../helpers/system.js';

const gpu = 'nvidia.com/gpu';
const fpga = 'example.com/fpga';
const GiB = 2 ** 30;

/** The behaviour both ledgers must show; `rows` reads the stored document's rows. */
function sharedCases(
  make: (instanceId: string) => Promise<PoolLedger>,
  rows: (pool: string) => Promise<Array<Record<string, unknown>>>,
  poolName: () => string,
) {
  it('writes extended counts into the row and counts them against maxExtended', async () => {
    const pool = poolName();
    const a = await make('a');
    const b = await make('b');
    const cap = { maxCpu: 16, maxMemoryBytes: 64 * GiB, maxExtended: { [gpu]: 2 } };
    for (const l of [a, b]) l.registerPool(pool, cap);
    expect(await a.reserve(pool, 'x1', 1, GiB, { extended: { [gpu]: 1 } })).toEqual({ ok: true });
    expect(await b.reserve(pool, 'x2', 1, GiB, { extended: { [gpu]: 1 } })).toEqual({ ok: true });
    expect(await a.reserve(pool, 'x3', 1, GiB, { extended: { [gpu]: 1 } })).toEqual({
      ok: false,
      pool,
      dimension: gpu,
      requested: 1,
      used: 2,
      max: 2,
      neverFits: false,
    });
    // Without extended resources the pool still grants CPU and memory.
    expect(await a.tryReserve(pool, 'x4', 1, GiB)).toBe(true);
    const stored = await rows(pool);
    expect(stored.map((r) => [r.agentId, r.extended])).toEqual([
      ['x1', { [gpu]: 1 }],
      ['x2', { [gpu]: 1 }],
      ['x4', undefined],
    ]);
    expect(await b.getUsage(pool)).toEqual({ cpus: 3, memBytes: 3 * GiB, extended: { [gpu]: 2 } });
    expect(await a.release(pool, 'x1')).toBe(true);
    expect(await b.tryReserve(pool, 'x3', 1, GiB, { extended: { [gpu]: 1 } })).toBe(true);
  });

  it('refuses a resource the cap neither caps nor provides, as never-fits naming it', async () => {
    const pool = poolName();
    const a = await make('a');
    a.registerPool(pool, { maxCpu: 4, maxExtended: { [gpu]: 4 } });
    expect(await a.reserve(pool, 'x', 1, 0, { extended: { [fpga]: 1 } })).toMatchObject({
      ok: false,
      dimension: fpga,
      max: 0,
      neverFits: true,
    });
    expect(await a.reserve(pool, 'y', 1, 0, { extended: { [gpu]: 5 } })).toMatchObject({
      ok: false,
      dimension: gpu,
      neverFits: true,
    });
    expect(await rows(pool)).toEqual([]);
  });

  it('enforces maxAgents across instances, whatever the rows hold', async () => {
    const pool = poolName();
    const a = await make('a');
    const b = await make('b');
    for (const l of [a, b]) l.registerPool(pool, { maxAgents: 3 });
    const answers = await Promise.all(
      Array.from({ length: 8 }, (_, i) => (i % 2 ? a : b).tryReserve(pool, `g${i}`, 0, 0)),
    );
    expect(answers.filter(Boolean)).toHaveLength(3);
    expect(await rows(pool)).toHaveLength(3);
    expect(await a.reserve(pool, 'late', 0, 0)).toMatchObject({
      ok: false,
      dimension: 'agents',
      requested: 1,
      used: 3,
      max: 3,
    });
  });

  it('leaves zero counts out and refuses bad extended options before writing', async () => {
    const pool = poolName();
    const a = await make('a');
    a.registerPool(pool, { provides: [gpu] });
    expect(await a.reserve(pool, 'z', 1, 0, { extended: { [gpu]: 0 } })).toEqual({ ok: true });
    expect((await rows(pool))[0]).not.toHaveProperty('extended');
    await expect(a.reserve(pool, 'b1', 1, 0, { extended: { gpu: 1 } })).rejects.toSatisfy(
      isInvalidInputError,
    );
    await expect(a.reserve(pool, 'b2', 1, 0, { extended: { [gpu]: 1.5 } })).rejects.toThrow(
      /whole number >= 0, got `1.5`/,
    );
    await expect(a.reserve(pool, 'b3', 1, 0, { extnded: { [gpu]: 1 } } as never)).rejects.toThrow(
      /Did you mean `extended`/,
    );
    expect(await rows(pool)).toHaveLength(1);
  });

  it('a kici-compatible pool refuses maxAgents and accepts extended caps', async () => {
    const a = await make('a');
    expect(() => a.registerPool(poolName(), { maxAgents: 2 }, { kiciCompatible: true })).toThrow(
      /kici-compatible.*maxAgents/,
    );
    expect(() =>
      a.registerPool(poolName(), { maxExtended: { [gpu]: 2 } }, { kiciCompatible: true }),
    ).not.toThrow();
    expect(() => a.registerPool(poolName(), {}, { kici: true } as never)).toThrow(
      /Unknown key "kici"/,
    );
  });
}

describe('MachineLedger with extended resources', () => {
  let dir: string;
  const open: MachineLedger[] = [];
  let serial = 0;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'ledger-extended-'));
  });
  afterEach(async () => {
    await Promise.all(open.splice(0).map((l) => l.close()));
  });
  afterAll(() => {
    rmSync(dir, { recursive: true, force: true });
  });
  sharedCases(
    async (instanceId) => {
      const l = new MachineLedger({ instanceId, dir });
      open.push(l);
      return l;
    },
    async (pool) => {
      try {
        return JSON.parse(readFileSync(join(dir, `${pool}.json`), 'utf8')).reservations;
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
        throw error;
      }
    },
    () => `m${serial++}`,
  );
});

const ok = hasSystem(['nats-server'], 'NatsPoolLedger with extended resources');

describe.runIf(ok)('NatsPoolLedger with extended resources', () => {
  let server: NatsServer;
  let nc: NatsConnection;
  let kv: KV;
  const open: NatsPoolLedger[] = [];
  let serial = 0;
  beforeAll(async () => {
    server = await startNatsServer();
    nc = await connect({ servers: server.url });
    kv = await new Kvm(nc).create('scaler-pools');
  });
  afterEach(async () => {
    await Promise.all(open.splice(0).map((l) => l.close()));
  });
  afterAll(async () => {
    await nc?.close();
    await server?.stop();
  });
  sharedCases(
    async (instanceId) => {
      const l = await NatsPoolLedger.connect({ servers: server.url, instanceId });
      open.push(l);
      return l;
    },
    async (pool) => {
      const entry = await kv.get(`pool.${pool}`);
      if (entry === null || entry.length === 0) return [];
      return JSON.parse(entry.string()).reservations;
    },
    () => `n${serial++}`,
  );

  it('the combiner wire carries a cap with maxExtended, provides and maxAgents', () => {
    const cap = { maxCpu: 4, maxExtended: { [gpu]: 2 }, provides: [fpga], maxAgents: 3 };
    const text = encodeRequest({
      pool: 'w',
      cap,
      ops: [
        {
          kind: 'reserve',
          row: {
            instanceId: 'a',
            pid: 1,
            bootId: 'b',
            agentId: 'x',
            cpus: 1,
            memBytes: 0,
            reservedAt: 0,
            leaseId: 'l',
            extended: { [gpu]: 1 },
          },
        },
      ],
    });
    const decoded = decodeRequest(new TextEncoder().encode(text));
    expect(decoded.cap).toEqual(cap);
    expect(decoded.ops[0]).toMatchObject({ row: { extended: { [gpu]: 1 } } });
  });
});
