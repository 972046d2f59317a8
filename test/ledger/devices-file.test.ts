/**
 * Device ids end to end through the file ledger (MachineLedger on a temp dir):
 * a grant answers and stores the lowest free ids, release and reap free them,
 * adoption keeps them, calls combined by another instance's write answer them
 * through the combine wire, a call settled from the pool file answers its
 * row's ids, and a pool file's extra fields (one named `__proto__` too) are
 * kept on every rewrite.
 */
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { normalizeCap } from '../../src/ledger/document/cap.js';
import { parseDocument, serializeDocument } from '../../src/ledger/document/codec.js';
import { combineDirPath } from '../../src/ledger/file/combining/channel.js';
import { settledFrom } from '../../src/ledger/file/combining/cycle.js';
import type { ReservationRow } from '../../src/ledger/types.js';
import { decodeReply, decodeRequest, encodeReply, encodeRequest } from '../../src/ledger/wire.js';
import { ledgerFactory } from '../helpers/machine-ledger.js';

const GPU = 'nvidia.com/gpu';
const cap = { maxCpu: 16, devices: { [GPU]: ['0', '1', '2', '3'] } };
const gpus = (n: number) => ({ extended: { [GPU]: n } });

let dir: string;
const ledgers = ledgerFactory(() => dir);
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'ledger-devices-'));
});
afterEach(async () => {
  await ledgers.closeAll();
  rmSync(dir, { recursive: true, force: true });
});

const file = () => join(dir, 'p.json');
const read = () => JSON.parse(readFileSync(file(), 'utf8'));
const held = () =>
  Object.fromEntries(
    (read().reservations as ReservationRow[]).map((row) => [row.agentId, row.devices?.[GPU]]),
  );

function open(instanceId = 'me', options: Parameters<typeof ledgers.make>[0] = {}) {
  const ledger = ledgers.make({ instanceId, ...options });
  ledger.registerPool('p', cap);
  return ledger;
}

describe('device ids in the file ledger', () => {
  it('a grant answers and stores the lowest free ids; release frees them; tryReserve still answers a boolean', async () => {
    const a = open('a');
    const b = open('b');
    expect(await a.reserve('p', 'x', 1, 0, gpus(2))).toEqual({
      ok: true,
      devices: { [GPU]: ['0', '1'] },
    });
    expect(await b.reserve('p', 'y', 1, 0, gpus(1))).toEqual({
      ok: true,
      devices: { [GPU]: ['2'] },
    });
    expect(await b.tryReserve('p', 'z', 1, 0, gpus(1))).toBe(true);
    expect(held()).toEqual({ x: ['0', '1'], y: ['2'], z: ['3'] });
    expect(read().cap).toEqual({
      maxCpu: 16,
      maxExtended: { [GPU]: 4 },
      devices: { [GPU]: ['0', '1', '2', '3'] },
    });
    expect(await a.reserve('p', 'w', 1, 0, gpus(1))).toMatchObject({
      ok: false,
      dimension: GPU,
      used: 4,
      max: 4,
      neverFits: false,
    });
    // No GPU asked: no ids, and the answer has no `devices`.
    expect(await a.reserve('p', 'cpu-only', 1, 0)).toEqual({ ok: true });
    expect(await a.release('p', 'x')).toBe(true);
    expect(await b.reserve('p', 'v', 1, 0, gpus(2))).toEqual({
      ok: true,
      devices: { [GPU]: ['0', '1'] },
    });
    expect((await a.list('p')).find((row) => row.agentId === 'v')?.devices).toEqual({
      [GPU]: ['0', '1'],
    });
  });

  it('a reap frees the ids of stale rows, in the write that hands them out again', async () => {
    const dead = {
      instanceId: 'me',
      pid: 999_999,
      bootId: 'boot-1',
      cpus: 1,
      memBytes: 0,
      reservedAt: 1,
    };
    writeFileSync(
      file(),
      serializeDocument({
        version: 1,
        cap: normalizeCap(cap),
        reservations: [
          { ...dead, agentId: 'gone', extended: { [GPU]: 2 }, devices: { [GPU]: ['0', '2'] } },
          {
            ...dead,
            agentId: 'other-boot',
            bootId: 'boot-0',
            extended: { [GPU]: 1 },
            devices: { [GPU]: ['1'] },
          },
        ],
      }),
    );
    const me = open('me', { isProcessAlive: () => false });
    expect(await me.reserve('p', 'x', 1, 0, gpus(3))).toEqual({
      ok: true,
      devices: { [GPU]: ['0', '1', '2'] },
    });
    expect(held()).toEqual({ x: ['0', '1', '2'] });
    expect(await me.release('p', 'x')).toBe(true);
    expect(await me.reapStale('p')).toBe(0);
    expect(await me.reserve('p', 'all', 1, 0, gpus(4))).toEqual({
      ok: true,
      devices: { [GPU]: ['0', '1', '2', '3'] },
    });
  });

  it('adoption after a restart keeps the ids: taken over, reserved again with the ids the agent uses, or refused when another row holds them', async () => {
    const before = open('host');
    const peer = open('peer');
    expect(await before.reserve('p', 'x', 1, 0, gpus(2))).toMatchObject({
      devices: { [GPU]: ['0', '1'] },
    });
    expect(await peer.reserve('p', 'y', 1, 0, gpus(1))).toMatchObject({
      devices: { [GPU]: ['2'] },
    });
    // The host restarts: the same instance id, a new ledger (another lease).
    const after = open('host');
    expect(
      await after.adopt('p', [
        { agentId: 'x', cpus: 1, memBytes: 0, ...gpus(2) },
        { agentId: 'gone', cpus: 1, memBytes: 0, ...gpus(1), devices: { [GPU]: ['3'] } },
      ]),
    ).toEqual([
      { ok: true, adopted: true, devices: { [GPU]: ['0', '1'] } },
      { ok: true, adopted: false, devices: { [GPU]: ['3'] } },
    ]);
    expect(held()).toEqual({ x: ['0', '1'], y: ['2'], gone: ['3'] });
    expect(await after.release('p', 'gone')).toBe(true);
    // The ids an agent says it uses, held by another row: refused, nothing written.
    const text = readFileSync(file(), 'utf8');
    expect(
      await after.adopt('p', [
        { agentId: 'z', cpus: 1, memBytes: 0, ...gpus(1), devices: { [GPU]: ['2'] } },
      ]),
    ).toEqual([expect.objectContaining({ ok: false, dimension: GPU })]);
    expect(readFileSync(file(), 'utf8')).toBe(text);
    // Without ids: the lowest free one.
    expect(await after.adopt('p', [{ agentId: 'z', cpus: 1, memBytes: 0, ...gpus(1) }])).toEqual([
      { ok: true, adopted: false, devices: { [GPU]: ['3'] } },
    ]);
  });

  it('a cap with other device ids is a cap mismatch', async () => {
    const a = open('a');
    await a.reserve('p', 'x', 1, 0, gpus(1));
    const b = ledgers.make({ instanceId: 'b' });
    b.registerPool('p', { maxCpu: 16, devices: { [GPU]: ['0', '1', '2', '4'] } });
    await expect(b.reserve('p', 'y', 1, 0, gpus(1))).rejects.toMatchObject({
      code: 'ERR_LEDGER_CAP_MISMATCH',
    });
  });
});

describe('device ids through combined calls', () => {
  it("calls another instance's write applies answer each caller its own ids (the combine wire keeps them)", async () => {
    const lock = join(dir, 'p.lock');
    const posted = () =>
      existsSync(combineDirPath(lock))
        ? readdirSync(combineDirPath(lock)).filter((name) => name.endsWith('.req')).length
        : 0;
    const writes = { a: 0, b: 0, c: 0 };
    let armed = true;
    const a = open('a', {
      hooks: {
        // The holder waits until both others have posted their calls, then applies all three.
        beforeClaim: async () => {
          if (!armed) return;
          armed = false;
          for (let i = 0; i < 5000 && posted() < 2; i++) await new Promise((r) => setTimeout(r, 2));
        },
        afterWrite: () => {
          writes.a++;
        },
      },
    });
    const b = open('b', { hooks: { afterWrite: () => void writes.b++ } });
    const c = open('c', { hooks: { afterWrite: () => void writes.c++ } });
    const first = a.reserve('p', 'xa', 1, 0, gpus(1));
    for (let i = 0; i < 5000 && !existsSync(lock); i++) await new Promise((r) => setTimeout(r, 1));
    const second = b.reserve('p', 'xb', 1, 0, gpus(2));
    for (let i = 0; i < 5000 && posted() < 1; i++) await new Promise((r) => setTimeout(r, 1));
    const third = c.reserve('p', 'xc', 1, 0, gpus(2));
    const answers = await Promise.all([first, second, third]);
    expect(writes).toEqual({ a: 1, b: 0, c: 0 });
    expect(answers).toEqual([
      { ok: true, devices: { [GPU]: ['0'] } },
      { ok: true, devices: { [GPU]: ['1', '2'] } },
      expect.objectContaining({ ok: false, dimension: GPU, used: 3, max: 4 }),
    ]);
    expect(held()).toEqual({ xa: ['0'], xb: ['1', '2'] });
  });

  it('a request whose cap lists device ids decodes; a reply keeps the answered ids', () => {
    const row: ReservationRow = {
      instanceId: 'i',
      pid: 1,
      bootId: 'b',
      agentId: 'x',
      cpus: 1,
      memBytes: 0,
      reservedAt: 1,
      leaseId: 'l',
      extended: { [GPU]: 1 },
      devices: { [GPU]: ['3'] },
    };
    const request = decodeRequest(
      new TextEncoder().encode(
        encodeRequest({ pool: 'p', cap: normalizeCap(cap), ops: [{ kind: 'adopt', rows: [row] }] }),
      ),
    );
    expect(request.cap.devices).toEqual(cap.devices);
    expect(request.ops).toEqual([{ kind: 'adopt', rows: [row] }]);
    const reply = encodeReply({
      kind: 'answers',
      answers: [
        {
          ok: true,
          kind: 'adopt',
          value: [{ ok: true, adopted: true, devices: { [GPU]: ['3'] } }],
        },
      ],
    });
    expect(decodeReply(new TextEncoder().encode(reply), 'p', request.ops)).toEqual({
      kind: 'answers',
      answers: [
        {
          ok: true,
          kind: 'adopt',
          value: [{ ok: true, adopted: true, devices: { [GPU]: ['3'] } }],
        },
      ],
    });
  });

  it('a reserve settled from the pool file (its answer was lost) answers the ids its row holds', () => {
    const row: ReservationRow = {
      instanceId: 'i',
      pid: 1,
      bootId: 'b',
      agentId: 'x',
      cpus: 1,
      memBytes: 0,
      reservedAt: 7,
      leaseId: 'l',
      extended: { [GPU]: 2 },
    };
    const doc = {
      version: 1 as const,
      cap: normalizeCap(cap),
      reservations: [{ ...row, devices: { [GPU]: ['1', '3'] } }],
    };
    const op = { kind: 'reserve' as const, row, maybeApplied: true };
    const settled = settledFrom(doc, op);
    expect(settled).toEqual({
      ok: true,
      kind: 'reserve',
      value: { ok: true, devices: { [GPU]: ['1', '3'] } },
    });
    // A copy: the answer never shares the document's arrays.
    (settled as { value: { devices: Record<string, string[]> } }).value.devices[GPU]!.push('0');
    expect(doc.reservations[0]!.devices[GPU]).toEqual(['1', '3']);
    expect(settledFrom({ ...doc, reservations: [] }, op)).toBe('not-applied');
    expect(settledFrom({ ...doc, reservations: [row] }, op)).toEqual({
      ok: true,
      kind: 'reserve',
      value: { ok: true },
    });
  });
});

describe('extra fields of a pool file, `__proto__` included', () => {
  const text = `{
  "version": 1,
  "writer": "other",
  "__proto__": { "polluted": "document" },
  "cap": { "maxCpu": 16, "maxExtended": { "${GPU}": 4 }, "devices": { "${GPU}": ["0", "1", "2", "3"] }, "future": 1, "__proto__": { "polluted": "cap" } },
  "reservations": [
    { "instanceId": "peer", "pid": 1, "bootId": "boot-1", "agentId": "kept", "cpus": 1, "memBytes": 0, "reservedAt": 1,
      "extended": { "${GPU}": 1 }, "devices": { "${GPU}": ["0"] }, "labels": ["a"], "__proto__": { "polluted": "row" } }
  ]
}`;

  it('keeps them on every rewrite, as own fields; the prototype is never touched', async () => {
    writeFileSync(file(), text);
    const ledger = open('me');
    expect(await ledger.reserve('p', 'x', 1, 0, gpus(1))).toEqual({
      ok: true,
      devices: { [GPU]: ['1'] },
    });
    expect(await ledger.release('p', 'x')).toBe(true);
    expect(await ledger.reapStale('p')).toBe(0);
    const after = readFileSync(file(), 'utf8');
    // JSON.parse makes `__proto__` an own field; the written text has all three.
    expect(after.match(/"__proto__"/g)).toHaveLength(3);
    const doc = JSON.parse(after);
    expect(Object.getOwnPropertyDescriptor(doc, '__proto__')?.value).toEqual({
      polluted: 'document',
    });
    expect(Object.getOwnPropertyDescriptor(doc.cap, '__proto__')?.value).toEqual({
      polluted: 'cap',
    });
    expect(doc.writer).toBe('other');
    expect(doc.cap.future).toBe(1);
    const [row] = doc.reservations;
    expect(Object.getOwnPropertyDescriptor(row, '__proto__')?.value).toEqual({ polluted: 'row' });
    expect(row.labels).toEqual(['a']);
    expect(row.devices).toEqual({ [GPU]: ['0'] });
    // What the ledger hands out: plain objects, own fields, the shared prototype untouched.
    const [listed] = await ledger.list('p');
    expect(Object.getPrototypeOf(listed)).toBe(Object.prototype);
    expect(Object.hasOwn(listed!, '__proto__')).toBe(true);
    expect((listed as { polluted?: unknown }).polluted).toBeUndefined();
    expect(({} as { polluted?: unknown }).polluted).toBeUndefined();
    expect(Object.prototype).not.toHaveProperty('polluted');
  });

  it('the codec keeps them through a parse and a serialize', () => {
    const doc = parseDocument(text, { pool: 'p', location: 'test' });
    expect(Object.getPrototypeOf(doc)).toBe(Object.prototype);
    expect(Object.hasOwn(doc, '__proto__')).toBe(true);
    expect(Object.hasOwn(doc.cap, '__proto__')).toBe(true);
    expect(Object.hasOwn(doc.reservations[0]!, '__proto__')).toBe(true);
    expect(JSON.parse(serializeDocument(doc))).toEqual(JSON.parse(text));
    expect(({} as { polluted?: unknown }).polluted).toBeUndefined();
  });

  it('a bad field is still refused', () => {
    expect(() =>
      parseDocument(text.replace('"cpus": 1', '"cpus": -1'), { pool: 'p', location: 'test' }),
    ).toThrow(/reservations\[0\]\.cpus/);
  });
});
