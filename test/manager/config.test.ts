import {
  formatConfigPath,
  parseScalerConfig,
  type ScalerConfigInput,
  validateScalerConfig,
} from 'scaler-primitives/manager';
import { describe, expect, it } from 'vitest';
import { isConfigError } from '../../src/errors/input.js';

const Gi = 2 ** 30;

const base = (): ScalerConfigInput => ({
  globalMaxAgents: 8,
  defaults: { resources: { requests: { cpus: '500m', memory: '512Mi' } } },
  resourceCap: { maxCpu: 16, maxMemory: '32Gi' },
  machinePools: { host: { maxCpu: 8 } },
  scalers: [
    {
      name: 'small',
      type: 'container',
      maxAgents: 4,
      labelSets: [{ labels: ['linux'], resources: { cpus: 1, memory: '2Gi' } }],
      machinePool: 'host',
      resourceCap: { maxCpu: '4', maxMemory: '8Gi' },
      warmPool: { size: 1 },
    },
    {
      name: 'gpu',
      type: 'vm',
      maxAgents: 1,
      mandatoryLabels: ['gpu'],
      labelSets: [{ labels: ['linux', 'gpu'] }],
    },
  ],
});

describe('scalerConfigSchema', () => {
  it('parses quantities and fills defaults', () => {
    const config = parseScalerConfig(base());
    expect(config.autoLabelPrefix).toBe('scaler-primitives:');
    expect(config.resourceCap).toEqual({ maxCpu: 16, maxMemoryBytes: 32 * Gi });
    expect(config.scalers[0]!.resourceCap).toEqual({ maxCpu: 4, maxMemoryBytes: 8 * Gi });
    expect(config.scalers[0]!.labelSets[0]!.resources).toEqual({
      requests: { cpus: 1, memory: 2 * Gi },
      limits: { cpus: 1, memory: 2 * Gi },
    });
    expect(config.scalers[0]!.warmPool).toEqual({
      size: 1,
      schedules: [],
      idleTimeoutSeconds: 300,
      labelSet: 0,
    });
    expect(config.scalers[0]!.mandatoryLabels).toEqual([]);
    expect(config.scalers[1]!.mandatoryLabels).toEqual(['gpu']);
  });

  it('is idempotent: a parsed config parses to itself', () => {
    const once = parseScalerConfig(base());
    expect(parseScalerConfig(once)).toEqual(once);
  });

  type Case = [string, (c: ScalerConfigInput) => void, Array<string | number>, RegExp];
  const cases: Case[] = [
    ['negative globalMaxAgents', (c) => (c.globalMaxAgents = -1), ['globalMaxAgents'], /0/],
    [
      'fractional maxAgents',
      (c) => (c.scalers[0]!.maxAgents = 1.5),
      ['scalers', 0, 'maxAgents'],
      /int/i,
    ],
    [
      'bad quantity in a label set',
      (c) => (c.scalers[0]!.labelSets[0]!.resources = { cpus: '2 cores' }),
      ['scalers', 0, 'labelSets', 0, 'resources', 'cpus'],
      /2 cores/,
    ],
    [
      'unknown key (typo)',
      (c) => ((c.scalers[0] as unknown as Record<string, unknown>).maxAgent = 3),
      ['scalers', 0],
      /maxAgent/,
    ],
    [
      'duplicate scaler name',
      (c) => (c.scalers[1]!.name = 'small'),
      ['scalers', 1, 'name'],
      /already used by scalers\[0\]/,
    ],
    [
      'unknown machine pool',
      (c) => (c.scalers[0]!.machinePool = 'nope'),
      ['scalers', 0, 'machinePool'],
      /Unknown machine pool "nope".*host/,
    ],
    [
      'reserved prefix in a label',
      (c) => c.scalers[0]!.labelSets[0]!.labels.push('scaler-primitives:scaler:other'),
      ['scalers', 0, 'labelSets', 0, 'labels', 1],
      /reserved prefix "scaler-primitives:"/,
    ],
    [
      'reserved prefix in a mandatory label',
      (c) => {
        c.scalers[1]!.mandatoryLabels = ['scaler-primitives:gpu'];
      },
      ['scalers', 1, 'mandatoryLabels', 0],
      /reserved prefix/,
    ],
    [
      'label set without a mandatory label',
      (c) => c.scalers[1]!.labelSets.push({ labels: ['linux'] }),
      ['scalers', 1, 'labelSets', 1, 'labels'],
      /lacks mandatory label\(s\) "gpu"/,
    ],
    [
      'warm pool larger than maxAgents',
      (c) => (c.scalers[0]!.warmPool = { size: 5 }),
      ['scalers', 0, 'warmPool', 'size'],
      /exceeds maxAgents 4/,
    ],
    [
      'warm pool label set out of range',
      (c) => (c.scalers[0]!.warmPool = { size: 1, labelSet: 3 }),
      ['scalers', 0, 'warmPool', 'labelSet'],
      /out of range/,
    ],
    [
      'no label sets',
      (c) => (c.scalers[0]!.labelSets = []),
      ['scalers', 0, 'labelSets'],
      /at least one label set/,
    ],
    [
      'bad scaler name',
      (c) => (c.scalers[0]!.name = 'has space'),
      ['scalers', 0, 'name'],
      /letters, digits/,
    ],
    [
      'label with whitespace',
      (c) => (c.scalers[0]!.labelSets[0]!.labels = ['a b']),
      ['scalers', 0, 'labelSets', 0, 'labels', 0],
      /whitespace/,
    ],
    [
      'label set request above its limit',
      (c) => {
        c.scalers[0]!.labelSets[0]!.resources = { requests: { cpus: 2 }, limits: { cpus: 1 } };
      },
      ['scalers', 0, 'labelSets', 0, 'resources'],
      /request 2 cores \(from labelSet\) exceeds its limit 1 cores \(from labelSet\)/,
    ],
    [
      'maxMemory and maxMemoryBytes together',
      (c) => (c.resourceCap = { maxMemory: '1Gi', maxMemoryBytes: 5 }),
      ['resourceCap', 'maxMemoryBytes'],
      /not both/,
    ],
  ];

  it.each(cases)('refuses %s with its path', (_name, mutate, path, message) => {
    const config = base();
    mutate(config);
    const result = validateScalerConfig(config);
    expect(result.ok).toBe(false);
    if (result.ok) return;
    const issue = result.errors.find((e) => formatConfigPath(e.path) === formatConfigPath(path));
    expect(issue, JSON.stringify(result.errors)).toBeDefined();
    expect(issue!.message).toMatch(message);
  });

  it('parseScalerConfig throws a ConfigError listing every issue', () => {
    const config = base();
    config.globalMaxAgents = -1;
    config.scalers[0]!.machinePool = 'nope';
    try {
      parseScalerConfig(config);
      expect.unreachable();
    } catch (error) {
      expect(isConfigError(error)).toBe(true);
      if (!isConfigError(error)) return;
      expect(error.issues.length).toBe(2);
      expect(error.message).toContain('globalMaxAgents');
      expect(error.message).toContain('scalers[0].machinePool');
    }
  });

  it('a custom prefix moves the reserved namespace', () => {
    const config = base();
    config.autoLabelPrefix = 'ci/';
    config.scalers[0]!.labelSets[0]!.labels.push('scaler-primitives:fine');
    expect(validateScalerConfig(config).ok).toBe(true);
    config.scalers[0]!.labelSets[0]!.labels.push('ci/nope');
    expect(validateScalerConfig(config).ok).toBe(false);
  });

  it('formats paths', () => {
    expect(formatConfigPath(['scalers', 0, 'labelSets', 1])).toBe('scalers[0].labelSets[1]');
    expect(formatConfigPath([])).toBe('(root)');
  });
});
