/**
 * validateScalerConfig reports every problem of a config in one pass: schema errors and
 * the cross-field rules together, the rules run on the parts that parsed, and no rule
 * reports a problem that only a replaced part would have.
 */

import { formatConfigPath, validateScalerConfig } from 'scaler-primitives/manager';
import { describe, expect, it } from 'vitest';

function problems(value: unknown): string[] {
  const result = validateScalerConfig(value);
  expect(result.ok).toBe(false);
  return result.errors.map((e) => `${formatConfigPath(e.path)}: ${e.message}`);
}

const scaler = (extra: Record<string, unknown>) => ({
  name: 'small',
  type: 'container',
  maxAgents: 2,
  labelSets: [{ labels: ['linux'] }],
  ...extra,
});

describe('validateScalerConfig: every problem in one pass', () => {
  it('an unknown machinePool beside a mistyped maxAgents (the issue)', () => {
    const found = problems({
      globalMaxAgents: 4,
      machinePools: { host: { maxCpu: 8 } },
      scalers: [
        {
          name: 'small',
          type: 'container',
          maxAgnets: 3,
          machinePool: 'gpu',
          labelSets: [{ labels: ['linux'] }],
        },
      ],
    });
    expect(found).toEqual([
      'scalers[0].maxAgents: Invalid input: expected number, received undefined',
      expect.stringMatching(
        /^scalers\[0\]: Unknown key "maxAgnets" \(did you mean "maxAgents"\?\); accepted keys: name, type, maxAgents, labelSets, /,
      ),
      'scalers[0].machinePool: Unknown machine pool "gpu"; declare it under machinePools (known: host)',
    ]);
  });

  it('type errors in one place, every cross-field rule elsewhere', () => {
    const found = problems({
      globalMaxAgents: 'four',
      autoLabelPrefix: 'ci/',
      machinePools: { host: { maxCpu: 8 } },
      scalers: [
        scaler({ resourceCap: { maxCpu: 'lots' }, warmPool: { size: 3 } }),
        scaler({
          maxJobsPerAgent: 0,
          mandatoryLabels: ['gpu'],
          labelSets: [{ labels: ['linux'] }, { labels: ['gpu', 'ci/x'] }],
        }),
        scaler({
          name: 'big',
          type: 7,
          labelSets: [
            { labels: ['linux'], resources: { requests: { cpus: 4 }, limits: { cpus: 2 } } },
          ],
        }),
      ],
    });
    const paths = found.map((line) => line.split(': ')[0]);
    expect(paths).toEqual(
      expect.arrayContaining([
        // schema
        'globalMaxAgents',
        'scalers[0].resourceCap.maxCpu',
        'scalers[1].maxJobsPerAgent',
        'scalers[2].type',
        // cross-field, on the parts that parsed
        'scalers[0].warmPool.size',
        'scalers[1].name',
        'scalers[1].labelSets[0].labels',
        'scalers[1].labelSets[1].labels[1]',
      ]),
    );
    expect(found.join('\n')).toContain('Warm pool size 3 exceeds maxAgents 2');
    expect(found.join('\n')).toContain('Scaler name "small" is already used by scalers[0]');
    expect(found.join('\n')).toContain('lacks mandatory label(s) "gpu"');
    expect(found.join('\n')).toContain('uses the reserved prefix "ci/"');
    expect(new Set(found).size).toBe(found.length);
  });

  it('a label set whose request exceeds its limit, beside a schema error', () => {
    const found = problems({
      globalMaxAgents: -1,
      scalers: [
        scaler({
          labelSets: [
            { labels: ['linux'], resources: { requests: { cpus: 4 }, limits: { cpus: 2 } } },
          ],
        }),
      ],
    });
    expect(found.map((line) => line.split(': ')[0])).toEqual([
      'globalMaxAgents',
      'scalers[0].labelSets[0].resources',
    ]);
  });

  it('each problem once, when zod already ran the rules (a failed check only)', () => {
    const found = problems({
      globalMaxAgents: -1,
      machinePools: {},
      scalers: [scaler({ machinePool: 'nope' })],
    });
    expect(found).toHaveLength(2);
  });

  it('no problem made up for a part that failed', () => {
    // maxAgents failed: no warm-pool bound; the name failed: no duplicate; the prefix
    // failed: no reserved-prefix rule; a label list failed: no mandatory-label rule; a
    // resource layer failed: no request-above-limit rule; a pool cap failed: the pool
    // still exists.
    const found = problems({
      globalMaxAgents: 4,
      autoLabelPrefix: 'has space',
      defaults: { resources: { requests: { cpus: 'many' } } },
      machinePools: { host: { maxCpu: 'x' } },
      scalers: [
        scaler({ maxAgents: -1, warmPool: { size: 5 }, machinePool: 'host' }),
        scaler({ name: '-bad-', labelSets: [{ labels: ['scaler-primitives:a'] }] }),
        scaler({ name: '-bad-', mandatoryLabels: ['gpu'], labelSets: [{ labels: [''] }] }),
        scaler({
          name: 'res',
          labelSets: [{ labels: ['x'], resources: { requests: { cpus: 4 }, limits: { cpus: 2 } } }],
        }),
      ],
    });
    const paths = found.map((line) => line.split(': ')[0]);
    expect(paths.sort()).toEqual(
      [
        'autoLabelPrefix',
        'defaults.resources.requests.cpus',
        'machinePools.host.maxCpu',
        'scalers[0].maxAgents',
        'scalers[1].name',
        'scalers[2].name',
        'scalers[2].labelSets[0].labels[0]', // empty
        'scalers[2].labelSets[0].labels[0]', // and no whitespace: zod reports both
      ].sort(),
    );
  });

  it('an unknown key at any depth names the nearest accepted key and every accepted one', () => {
    const found = problems({
      globalMaxAgents: 4,
      machinePools: { host: { maxCpu: 8, maxMemroy: '8Gi' } },
      limits: { cpus: { max: 4, defualt: 1 } },
      scalers: [
        scaler({
          labelSets: [{ labels: ['linux'], resourecs: {} }],
          warmPool: { size: 1, sise: 2, idleTimeoutSecs: 5 },
        }),
      ],
      sclaers: [],
    });
    expect(found).toEqual(
      expect.arrayContaining([
        '(root): Unknown key "sclaers" (did you mean "scalers"?); accepted keys: globalMaxAgents, autoLabelPrefix, defaults, resourceCap, limits, machinePools, scalers, quantityConvention',
        'machinePools.host: Unknown key "maxMemroy" (did you mean "maxMemory"?); accepted keys: maxCpu, maxMemory, maxMemoryBytes, maxExtended, provides, maxAgents, devices',
        'limits.cpus: Unknown key "defualt" (did you mean "default"?); accepted keys: min, max, maxLimitRequestRatio, defaultRequest, default',
        expect.stringMatching(
          /^scalers\[0\]\.labelSets\[0\]: Unknown key "resourecs" \(did you mean "resources"\?\); accepted keys: /,
        ),
        'scalers[0].warmPool: Unknown keys "sise", "idleTimeoutSecs" (did you mean "size" for "sise"?); accepted keys: size, schedules, idleTimeoutSeconds, labelSet',
      ]),
    );
  });

  it('a document that is not an object: one problem at the root', () => {
    expect(problems([1, 2])).toHaveLength(1);
    expect(problems(null)).toHaveLength(1);
  });

  it('a valid config is still valid, and its parse unchanged', () => {
    const result = validateScalerConfig({ globalMaxAgents: 1, scalers: [scaler({})] });
    expect(result.ok).toBe(true);
  });
});
