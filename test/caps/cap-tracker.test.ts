import fc from 'fast-check';
import { CapTracker } from 'scaler-primitives/caps';
import { describe, expect, it } from 'vitest';
import { isDuplicateReservationError } from '../../src/errors/resources.js';

describe('CapTracker', () => {
  it('reserves in every scope and reports usage per scope', () => {
    const caps = new CapTracker({ caps: { global: { maxCpu: 8 } } });
    expect(caps.tryReserve('a', ['global', 'scaler:x'], { cpus: 1.5, memBytes: 100 })).toEqual({
      ok: true,
    });
    expect(caps.usage('global')).toEqual({ cpus: 1.5, memBytes: 100, reservations: 1 });
    expect(caps.usage('scaler:x')).toEqual({ cpus: 1.5, memBytes: 100, reservations: 1 });
    expect(caps.usage('never-used')).toEqual({ cpus: 0, memBytes: 0, reservations: 0 });
    expect(caps.has('a')).toBe(true);
  });

  it('refuses all-or-nothing, naming scope, dimension, requested, used and max', () => {
    const caps = new CapTracker({
      caps: { global: { maxCpu: 8 }, 'scaler:small': { maxMemoryBytes: 1000 } },
    });
    caps.tryReserve('a', ['global', 'scaler:small'], { cpus: 1, memBytes: 800 });
    const refusal = caps.tryReserve('b', ['global', 'scaler:small'], { cpus: 1, memBytes: 300 });
    expect(refusal).toEqual({
      ok: false,
      scope: 'scaler:small',
      dimension: 'memory',
      requested: 300,
      used: 800,
      max: 1000,
      neverFits: false,
    });
    // Nothing of the refused reservation stays anywhere.
    expect(caps.usage('global')).toEqual({ cpus: 1, memBytes: 800, reservations: 1 });
    expect(caps.has('b')).toBe(false);
  });

  it('checks CPU before memory and flags a request that can never fit', () => {
    const caps = new CapTracker({ caps: { pool: { maxCpu: 2, maxMemoryBytes: 10 } } });
    expect(caps.tryReserve('x', ['pool'], { cpus: 3, memBytes: 11 })).toMatchObject({
      ok: false,
      dimension: 'cpu',
      neverFits: true,
    });
    expect(caps.neverFits(['pool'], { cpus: 3, memBytes: 0 })).toBe(true);
    expect(caps.neverFits(['pool'], { cpus: 2, memBytes: 10 })).toBe(false);
    expect(caps.neverFits(['other'], { cpus: 1000, memBytes: 0 })).toBe(false);
  });

  it('refuses a second reservation under a held id instead of counting it twice', () => {
    const caps = new CapTracker();
    caps.tryReserve('a', ['s'], { cpus: 1, memBytes: 0 });
    let caught: unknown;
    try {
      caps.tryReserve('a', ['s'], { cpus: 1, memBytes: 0 });
    } catch (error) {
      caught = error;
    }
    expect(isDuplicateReservationError(caught)).toBe(true);
    expect((caught as Error).message).toContain('"a"');
    expect(caps.usage('s').cpus).toBe(1);
  });

  it('releases idempotently and returns what it released', () => {
    const caps = new CapTracker();
    caps.tryReserve('a', ['s', 't'], { cpus: 0.25, memBytes: 7 });
    expect(caps.release('a')).toEqual({ id: 'a', scopes: ['s', 't'], cpus: 0.25, memBytes: 7 });
    expect(caps.release('a')).toBeUndefined();
    expect(caps.usage('s')).toEqual({ cpus: 0, memBytes: 0, reservations: 0 });
  });

  it('counts duplicate scopes once', () => {
    const caps = new CapTracker({ caps: { s: { maxCpu: 1 } } });
    expect(caps.tryReserve('a', ['s', 's'], { cpus: 1, memBytes: 0 }).ok).toBe(true);
    expect(caps.usage('s').cpus).toBe(1);
  });

  it('keeps reservations when a cap is lowered, and refuses new ones until usage falls', () => {
    const caps = new CapTracker({ caps: { s: { maxCpu: 4 } } });
    caps.tryReserve('a', ['s'], { cpus: 2, memBytes: 0 });
    caps.tryReserve('b', ['s'], { cpus: 2, memBytes: 0 });
    caps.setCap('s', { maxCpu: 2 });
    expect(caps.usage('s').cpus).toBe(4);
    expect(caps.tryReserve('c', ['s'], { cpus: 0.001, memBytes: 0 }).ok).toBe(false);
    caps.release('a');
    expect(caps.tryReserve('c', ['s'], { cpus: 0.001, memBytes: 0 }).ok).toBe(false);
    caps.release('b');
    expect(caps.tryReserve('c', ['s'], { cpus: 2, memBytes: 0 }).ok).toBe(true);
    expect(caps.getCap('s')).toEqual({ maxCpu: 2 });
    caps.setCap('s', undefined);
    expect(caps.getCap('s')).toBeUndefined();
  });

  it('never drifts: 0.1 + 0.2 cores released leaves exactly zero', () => {
    const caps = new CapTracker({ caps: { s: { maxCpu: 0.3 } } });
    expect(caps.tryReserve('a', ['s'], { cpus: 0.1, memBytes: 0 }).ok).toBe(true);
    expect(caps.tryReserve('b', ['s'], { cpus: 0.2, memBytes: 0 }).ok).toBe(true);
    expect(caps.usage('s').cpus).toBe(0.3);
    caps.release('a');
    caps.release('b');
    expect(caps.usage('s').cpus).toBe(0);
  });

  it('snapshots scopes and reservations as copies', () => {
    const caps = new CapTracker({ caps: { g: { maxCpu: 2 } } });
    caps.tryReserve('a', ['g'], { cpus: 1, memBytes: 5 });
    const snap = caps.snapshot();
    expect(snap).toEqual({
      scopes: { g: { cap: { maxCpu: 2 }, usage: { cpus: 1, memBytes: 5, reservations: 1 } } },
      reservations: [{ id: 'a', scopes: ['g'], cpus: 1, memBytes: 5 }],
    });
    (snap.reservations[0]!.scopes as string[]).push('mutated');
    expect(caps.snapshot().reservations[0]!.scopes).toEqual(['g']);
  });

  it('forgets uncapped scopes once idle', () => {
    const caps = new CapTracker();
    caps.tryReserve('a', ['agent:a'], { cpus: 1, memBytes: 0 });
    caps.release('a');
    expect(Object.keys(caps.snapshot().scopes)).toEqual([]);
  });

  describe('refuses bad arguments with a TypeError naming them', () => {
    const caps = new CapTracker();
    it.each([
      ['empty id', () => caps.tryReserve('', ['s'], { cpus: 1, memBytes: 0 }), '`id`'],
      [
        'non-array scopes',
        () => caps.tryReserve('a', 's' as never, { cpus: 1, memBytes: 0 }),
        '`scopes`',
      ],
      ['empty scope', () => caps.tryReserve('a', [''], { cpus: 1, memBytes: 0 }), 'scope'],
      ['negative cpus', () => caps.tryReserve('a', ['s'], { cpus: -1, memBytes: 0 }), '`cpus`'],
      ['NaN cpus', () => caps.tryReserve('a', ['s'], { cpus: Number.NaN, memBytes: 0 }), '`cpus`'],
      [
        'fractional bytes',
        () => caps.tryReserve('a', ['s'], { cpus: 1, memBytes: 1.5 }),
        '`memBytes`',
      ],
      ['missing requests', () => caps.tryReserve('a', ['s'], undefined as never), '`requests`'],
      ['negative maxCpu', () => caps.setCap('s', { maxCpu: -1 }), '`maxCpu`'],
      [
        'infinite maxMemoryBytes',
        () => caps.setCap('s', { maxMemoryBytes: Number.POSITIVE_INFINITY }),
        '`maxMemoryBytes`',
      ],
      ['empty scope in setCap', () => caps.setCap('', {}), 'scope'],
    ])('%s', (_name, call, fragment) => {
      expect(call).toThrow(TypeError);
      expect(call).toThrow(fragment);
    });
  });
});

type Op =
  | { kind: 'reserve'; id: number; scopes: number[]; milli: number; bytes: number }
  | { kind: 'release'; id: number }
  | { kind: 'setCap'; scope: number; maxMilli?: number; maxBytes?: number };

const SCOPES = ['global', 'scaler:a', 'scaler:b', 'pool:p'];

const opArb: fc.Arbitrary<Op> = fc.oneof(
  fc.record({
    kind: fc.constant('reserve' as const),
    id: fc.integer({ min: 0, max: 20 }),
    scopes: fc.uniqueArray(fc.integer({ min: 0, max: SCOPES.length - 1 }), {
      minLength: 1,
      maxLength: SCOPES.length,
    }),
    milli: fc.integer({ min: 0, max: 3000 }),
    bytes: fc.integer({ min: 0, max: 3000 }),
  }),
  fc.record({ kind: fc.constant('release' as const), id: fc.integer({ min: 0, max: 20 }) }),
  fc.record(
    {
      kind: fc.constant('setCap' as const),
      scope: fc.integer({ min: 0, max: SCOPES.length - 1 }),
      maxMilli: fc.integer({ min: 0, max: 8000 }),
      maxBytes: fc.integer({ min: 0, max: 8000 }),
    },
    { requiredKeys: ['kind', 'scope'] },
  ),
);

describe('CapTracker properties', () => {
  it('past hundreds of live reservations: duplicates, releases and snapshot order match a Map', () => {
    // The tracker keeps recent reservations apart from older ones; the model is one Map.
    fc.assert(
      fc.property(
        // Three reserves to a release over 1,500 ids: several hundred live at the end.
        fc.array(fc.tuple(fc.nat(3), fc.nat(1500)), { minLength: 300, maxLength: 2000 }),
        (ops) => {
          const caps = new CapTracker({ caps: { global: { maxCpu: 1e6 } } });
          const model = new Map<string, number>();
          for (const [kind, n] of ops) {
            const id = `agent-${n}`;
            if (kind > 0) {
              if (model.has(id)) {
                expect(() => caps.tryReserve(id, ['global'], { cpus: 1, memBytes: 0 })).toThrow(
                  /already held/,
                );
              } else {
                expect(
                  caps.tryReserve(id, ['global', `s${n % 3}`], { cpus: 1, memBytes: n }).ok,
                ).toBe(true);
                model.set(id, n);
              }
            } else {
              const released = caps.release(id);
              expect(released?.memBytes).toBe(model.get(id));
              if (released) expect(released.scopes).toEqual(['global', `s${n % 3}`]);
              model.delete(id);
            }
            expect(caps.has(id)).toBe(model.has(id));
          }
          expect(caps.snapshot().reservations.map((r) => r.id)).toEqual([...model.keys()]);
          expect(caps.usage('global').reservations).toBe(model.size);
          for (const id of [...model.keys()]) caps.release(id);
          expect(caps.usage('global')).toEqual({ cpus: 0, memBytes: 0, reservations: 0 });
          expect(caps.snapshot().reservations).toEqual([]);
        },
      ),
      { numRuns: 40, endOnFailure: true },
    );
  });

  it('usage equals the sum of live reservations; granted never exceed caps; all-or-nothing', () => {
    fc.assert(
      fc.property(fc.array(opArb, { maxLength: 200 }), (ops) => {
        const caps = new CapTracker();
        const live = new Map<string, { scopes: string[]; milli: number; bytes: number }>();
        const capOf = new Map<string, { maxMilli?: number; maxBytes?: number }>();
        const sum = (scope: string) => {
          let milli = 0;
          let bytes = 0;
          for (const r of live.values()) {
            if (r.scopes.includes(scope)) {
              milli += r.milli;
              bytes += r.bytes;
            }
          }
          return { milli, bytes };
        };
        for (const op of ops) {
          if (op.kind === 'reserve') {
            const id = `r${op.id}`;
            if (live.has(id)) {
              expect(() => caps.tryReserve(id, ['global'], { cpus: 0, memBytes: 0 })).toThrow();
              continue;
            }
            const scopes = op.scopes.map((i) => SCOPES[i]!);
            const before = SCOPES.map((s) => caps.usage(s));
            const result = caps.tryReserve(id, scopes, {
              cpus: op.milli / 1000,
              memBytes: op.bytes,
            });
            // Would it fit everywhere, by the model?
            const fits = scopes.every((s) => {
              const cap = capOf.get(s);
              const used = sum(s);
              return (
                (cap?.maxMilli === undefined || used.milli + op.milli <= cap.maxMilli) &&
                (cap?.maxBytes === undefined || used.bytes + op.bytes <= cap.maxBytes)
              );
            });
            expect(result.ok).toBe(fits);
            if (result.ok) {
              live.set(id, { scopes, milli: op.milli, bytes: op.bytes });
            } else {
              expect(SCOPES.map((s) => caps.usage(s))).toEqual(before);
            }
          } else if (op.kind === 'release') {
            const id = `r${op.id}`;
            const released = caps.release(id);
            expect(released === undefined).toBe(!live.has(id));
            live.delete(id);
          } else {
            const scope = SCOPES[op.scope]!;
            const cap: { maxCpu?: number; maxMemoryBytes?: number } = {};
            if (op.maxMilli !== undefined) cap.maxCpu = op.maxMilli / 1000;
            if (op.maxBytes !== undefined) cap.maxMemoryBytes = op.maxBytes;
            caps.setCap(scope, cap);
            capOf.set(scope, { maxMilli: op.maxMilli, maxBytes: op.maxBytes });
          }
          for (const scope of SCOPES) {
            const { milli, bytes } = sum(scope);
            const usage = caps.usage(scope);
            expect(Math.round(usage.cpus * 1000)).toBe(milli);
            expect(usage.cpus).toBe(milli / 1000);
            expect(usage.memBytes).toBe(bytes);
          }
        }
        for (const id of [...live.keys()]) caps.release(id);
        for (const scope of SCOPES) {
          expect(caps.usage(scope)).toEqual({ cpus: 0, memBytes: 0, reservations: 0 });
        }
      }),
      { numRuns: 300 },
    );
  });

  it('a granted reservation never takes a scope above its cap', () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 1, max: 2500 }), { maxLength: 100 }),
        fc.integer({ min: 0, max: 10_000 }),
        (requests, maxMilli) => {
          const caps = new CapTracker({ caps: { s: { maxCpu: maxMilli / 1000 } } });
          requests.forEach((milli, i) => {
            caps.tryReserve(`r${i}`, ['s'], { cpus: milli / 1000, memBytes: 0 });
            expect(caps.usage('s').cpus * 1000).toBeLessThanOrEqual(maxMilli + 1e-9);
          });
        },
      ),
    );
  });
});
