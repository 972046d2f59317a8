// Issue 22, "one meaning of not declared": whatever resolveResources answers,
// capsFromResources turns its limits into caps that encode, decode and read
// back, and an unset limit is an absent field, never 0 and never an error.
import fc from 'fast-check';
import {
  capsFromResources,
  decodeAgentCaps,
  encodeAgentCaps,
  resourcesFromCaps,
} from 'scaler-primitives/agent-caps';
import { type ResourceRequest, resolveResources } from 'scaler-primitives/resources';
import { describe, expect, it } from 'vitest';
import { isResourceConflictError, isResourceParseError } from '../../src/errors/resources.js';
import { MAX_CPU_LIMIT_CORES } from '../../src/resources/types.js';

const gpu = 'nvidia.com/gpu';

// Millicores from 0 to past the largest CPU limit, as numbers or strings.
const cpus = fc.oneof(
  fc.integer({ min: 0, max: 64_000 }).map((m) => m / 1000),
  fc.integer({ min: 0, max: 64_000 }).map((m) => `${m}m`),
  fc.integer({ min: 0, max: 300_000 }),
  fc.constantFrom(0, '0', '0m', MAX_CPU_LIMIT_CORES, MAX_CPU_LIMIT_CORES + 0.01),
);
const memory = fc.oneof(
  fc.integer({ min: 0, max: 2 ** 40 }),
  fc.integer({ min: 0, max: 4096 }).map((n) => `${n}Mi`),
  fc.integer({ min: 0, max: 64 }).map((n) => `${n}g`),
  fc.constantFrom(0, '0', '0Gi', 1, Number.MAX_SAFE_INTEGER),
);
const spec = fc.record(
  { cpus, memory, [gpu]: fc.integer({ min: 0, max: 4 }) },
  { requiredKeys: [] },
);
// The flat form (config layers) declares both sides at once.
const layer: fc.Arbitrary<ResourceRequest | undefined> = fc.oneof(
  fc.constant(undefined),
  spec.map((flat) => flat as ResourceRequest),
  fc.record({ requests: spec, limits: spec }, { requiredKeys: [] }),
);

describe('capsFromResources of resolved limits', () => {
  it('succeeds for every resolved limit and round-trips through the codec', () => {
    let resolved = 0;
    fc.assert(
      fc.property(fc.array(layer, { maxLength: 4 }), (layers) => {
        let r: ReturnType<typeof resolveResources>;
        try {
          r = resolveResources(layers);
        } catch (error) {
          // Only declarations that are wrong in themselves are refused, with a typed error.
          expect(isResourceConflictError(error) || isResourceParseError(error)).toBe(true);
          return;
        }
        resolved++;
        const caps = capsFromResources(r.limits);
        // Unset is absent on both sides, never 0.
        expect(caps.cpuQuota === undefined).toBe(r.limits.cpus === undefined);
        expect(caps.memoryMax === undefined).toBe(r.limits.memBytes === undefined);
        if (r.limits.cpus === undefined) expect(r.provenance.limits.cpus).not.toBe('zero');
        const decoded = decodeAgentCaps(encodeAgentCaps(caps));
        expect(decoded).toEqual(caps);
        const back = resourcesFromCaps(decoded);
        expect(back.memBytes).toBe(r.limits.memBytes);
        if (r.limits.cpus === undefined) {
          expect(back.cpus).toBeUndefined();
        } else {
          // Rounded up to a whole percent: never a smaller cap than asked.
          expect(back.cpus).toBeGreaterThanOrEqual(r.limits.cpus);
          expect(back.cpus! - r.limits.cpus).toBeLessThan(0.01);
        }
      }),
      { numRuns: 500 },
    );
    // The property saw real resolutions, not only refusals.
    expect(resolved).toBeGreaterThan(100);
  });

  it('a label set that declares only CPU gets a CPU cap and no memory cap (no TypeError)', () => {
    const r = resolveResources([undefined, { requests: { cpus: 2 } }, undefined, undefined]);
    expect(r.limits).toEqual({ cpus: 2 });
    expect(r.requests).toEqual({ cpus: 2, memBytes: 0 });
    expect(capsFromResources(r.limits)).toEqual({ cpuQuota: '200%' });
    expect(new TextDecoder().decode(encodeAgentCaps(capsFromResources(r.limits)))).toBe(
      '{"cpu_quota":"200%"}',
    );
  });

  it('nothing declared: no limit, empty caps, `{}` on the wire', () => {
    const r = resolveResources([]);
    expect(capsFromResources(r.limits)).toEqual({});
    expect(new TextDecoder().decode(encodeAgentCaps(capsFromResources(r.limits)))).toBe('{}');
  });

  it('carries no extended resource (systemd has no GPU cap) but accepts it', () => {
    const r = resolveResources([{ requests: { cpus: 1, memory: '1Gi', [gpu]: 2 } }]);
    expect(r.limits.extended).toEqual({ [gpu]: 2 });
    expect(capsFromResources(r.limits)).toEqual({ cpuQuota: '100%', memoryMax: '1G' });
  });

  it('still refuses a cap of 0 given by hand, saying to leave the field unset', () => {
    expect(() => capsFromResources({ memBytes: 0 })).toThrow(/leave `memBytes` unset/);
    expect(() => capsFromResources({ cpus: 0 })).toThrow(/leave `cpus` unset/);
    expect(() => capsFromResources({ cpus: 1, extended: 3 as never })).toThrow(TypeError);
    expect(() => capsFromResources({ cpus: 1, gpus: 1 } as never)).toThrow(/gpus/);
  });
});
