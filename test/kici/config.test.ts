import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  type KiciScalerConfig,
  parseKiciScalerConfig,
  toScalerConfig,
} from 'scaler-primitives/kici';
import { parseScalerConfig } from 'scaler-primitives/manager';
import { describe, expect, it } from 'vitest';
import { isConfigError } from '../../src/errors/input.js';

const GiB = 2 ** 30;
const example = (): KiciScalerConfig =>
  JSON.parse(
    readFileSync(join(import.meta.dirname, '../fixtures/kici/scaler-config.json'), 'utf8'),
  ) as KiciScalerConfig;

const minimal = (scaler: Record<string, unknown> = {}): KiciScalerConfig => ({
  version: 1,
  scalers: [
    { name: 's', type: 'container', maxAgents: 2, labelSets: [{ labels: ['linux'] }], ...scaler },
  ],
});

const at = (result: ReturnType<typeof toScalerConfig>, path: string) =>
  result.issues.filter((i) => i.path.join('.') === path);

describe('toScalerConfig', () => {
  it('translates the worked example of docs/migrating-from-kici.md', () => {
    const result = toScalerConfig(example());
    expect(result.issues.filter((i) => i.severity === 'error')).toEqual([]);
    expect(result.ok).toBe(true);
    expect(result.input).toEqual({
      globalMaxAgents: 20,
      // kici's automatic labels, not the core's `scaler-primitives:`.
      autoLabelPrefix: 'kici:',
      defaults: {
        resources: { requests: { cpus: 1, memory: GiB }, limits: { cpus: 1, memory: GiB } },
      },
      resourceCap: { maxCpu: 24, maxMemoryBytes: 48 * GiB },
      machinePools: { 'build-host': { maxCpu: 16, maxMemoryBytes: 32 * GiB } },
      scalers: [
        {
          name: 'containers',
          type: 'container',
          maxAgents: 8,
          machinePool: 'build-host',
          resourceCap: { maxCpu: 12, maxMemoryBytes: 24 * GiB },
          warmPool: { size: 2, idleTimeoutSeconds: 600 },
          labelSets: [
            {
              labels: ['linux', 'docker'],
              resources: {
                requests: { cpus: 2, memory: 3.5 * GiB },
                limits: { cpus: 4, memory: 8 * GiB },
              },
            },
          ],
          options: {
            maxConcurrentSpawns: 4,
            runtime: 'podman',
            networkIsolation: true,
            labelSets: [
              {
                image: 'ghcr.io/example/agent:1.4',
                imagePullPolicy: 'IfNotPresent',
                networkPolicy: { allowlist: ['10.1.2.0/24'], denyAll: false },
              },
            ],
          },
        },
        {
          name: 'vms',
          type: 'firecracker',
          maxAgents: 4,
          machinePool: 'build-host',
          labelSets: [
            {
              labels: ['linux', 'vm'],
              resources: {
                requests: { cpus: 2, memory: 2 * GiB },
                limits: { cpus: 2, memory: 2 * GiB },
              },
            },
          ],
          options: { vcpuCount: 2, memSizeMib: 2048, networkIsolation: true },
        },
      ],
    });
    // The output is a valid ScalerManager config.
    expect(parseScalerConfig(result.input)).toEqual(result.config);
    expect(result.config!.machinePools['build-host']).toEqual({
      maxCpu: 16,
      maxMemoryBytes: 32 * GiB,
    });
    // Every setting without an equivalent is named.
    const warned = result.issues.map((i) => i.path.join('.'));
    expect(warned).toEqual(
      expect.arrayContaining([
        'scalers.0.maxConcurrentSpawns',
        'scalers.0.labelSets.0.networkPolicy',
        'scalers.0.networkIsolation',
        'scalers.1.networkIsolation',
        'firecracker',
      ]),
    );
    expect(result.issues.every((i) => i.severity === 'warning')).toBe(true);
  });

  it('accepts the parsed 0.9.1 form (maxMemoryBytes caps, defaults filled in)', () => {
    const result = toScalerConfig({
      version: 1,
      globalMaxAgents: 50,
      machinePools: [{ name: 'p', cap: { maxCpu: 4, maxMemoryBytes: 4 * GiB } }],
      scalers: [
        {
          name: 's',
          type: 'bare-metal',
          maxAgents: 1,
          maxConcurrentSpawns: 8,
          runtime: 'auto',
          networkIsolation: false,
          mandatoryLabels: [],
          enforceCgroups: false,
          chrootBaseDir: '/srv/jailer',
          vcpuCount: 2,
          memSizeMib: 512,
          requireSudo: false,
          claimTtlSeconds: 300,
          agentTokenTtlSeconds: 600,
          machinePool: 'p',
          roles: undefined,
          labelSets: [
            { labels: ['linux'], imagePullPolicy: 'IfNotPresent', containerSocket: false },
          ],
        },
      ],
    });
    expect(result.ok).toBe(true);
    expect(result.config!.machinePools).toEqual({ p: { maxCpu: 4, maxMemoryBytes: 4 * GiB } });
    expect(result.input.scalers[0]!.options!.networkIsolation).toBe(false);
  });

  it('fills kici’s globalMaxAgents default and keeps kici’s memory rounding', () => {
    const result = toScalerConfig({
      ...minimal({ resourceCap: { maxMemory: '0.3m' } }),
    });
    expect(result.input.globalMaxAgents).toBe(50);
    expect(result.config!.scalers[0]!.resourceCap).toEqual({ maxMemoryBytes: 314572 });
  });

  it('reports settings that widen what runs where as errors until acknowledged', () => {
    const roles = toScalerConfig(minimal({ roles: ['builder'] }));
    expect(roles.ok).toBe(false);
    expect(at(roles, 'scalers.0.roles')[0]!.severity).toBe('error');
    expect(roles.config).toBeUndefined();
    const acked = toScalerConfig(minimal({ roles: ['builder'] }), { acknowledge: ['roles'] });
    expect(acked.ok).toBe(true);
    expect(at(acked, 'scalers.0.roles')[0]!.severity).toBe('warning');
    expect(acked.input.scalers[0]!.options!.roles).toEqual(['builder']);
    expect(toScalerConfig(minimal({ roles: ['all'] })).ok).toBe(true);

    const mac = toScalerConfig(minimal({ platform: { os: 'macos', arch: 'arm64' } }));
    expect(at(mac, 'scalers.0.platform')[0]!.severity).toBe('error');
    const linux = toScalerConfig(minimal({ platform: { os: 'linux', arch: 'x64' } }));
    expect(at(linux, 'scalers.0.platform')[0]!.severity).toBe('warning');
  });

  it('refuses unknown settings kici would drop silently', () => {
    const result = toScalerConfig({
      ...minimal({ maxAgnets: 3 }),
      globalMaxAgent: 4,
    } as KiciScalerConfig);
    expect(at(result, 'scalers.0.maxAgnets')[0]!.severity).toBe('error');
    expect(at(result, 'globalMaxAgent')[0]!.severity).toBe('error');
    const set = toScalerConfig(minimal({ labelSets: [{ labels: ['x'], imagee: 'a' }] }));
    expect(at(set, 'scalers.0.labelSets.0.imagee')[0]!.severity).toBe('error');
    const warm = toScalerConfig(minimal({ warmPool: { enabled: true, sise: 1 } }));
    expect(at(warm, 'scalers.0.warmPool.sise')[0]!.severity).toBe('error');
  });

  it('reports bad versions, quantities and duplicate pools at their kici paths', () => {
    expect(at(toScalerConfig({ ...minimal(), version: 2 }), 'version')[0]!.severity).toBe('error');
    expect(at(toScalerConfig({ scalers: [] } as KiciScalerConfig), 'version')).toHaveLength(1);
    const memory = toScalerConfig(minimal({ resourceCap: { maxMemory: '8GB' } }));
    expect(at(memory, 'scalers.0.resourceCap')[0]!.message).toContain('"8GB"');
    const pools = toScalerConfig({
      ...minimal(),
      machinePools: [
        { name: 'p', cap: { maxCpu: 1 } },
        { name: 'p', cap: { maxCpu: 2 } },
      ],
    });
    expect(at(pools, 'machinePools.1.name')[0]!.severity).toBe('error');
    // A pool name our schema refuses is reported at kici's path.
    const badName = toScalerConfig({
      ...minimal(),
      machinePools: [{ name: 'has space', cap: { maxCpu: 1 } }],
    });
    expect(at(badName, 'machinePools.0.name')[0]!.severity).toBe('error');
  });

  it('passes our schema’s cross-field errors through (unknown pool, warm pool > maxAgents)', () => {
    const result = toScalerConfig(
      minimal({ machinePool: 'nope', warmPool: { enabled: true, size: 5 } }),
    );
    expect(result.ok).toBe(false);
    expect(at(result, 'scalers.0.machinePool')[0]!.message).toContain('Unknown machine pool');
    expect(at(result, 'scalers.0.warmPool.size')[0]!.message).toContain('exceeds maxAgents');
  });

  it('warns that kici warms every label set and ScalerManager one', () => {
    const result = toScalerConfig(
      minimal({
        maxAgents: 4,
        warmPool: { enabled: true, size: 1 },
        labelSets: [{ labels: ['a'] }, { labels: ['b'] }],
      }),
    );
    expect(result.ok).toBe(true);
    expect(at(result, 'scalers.0.warmPool.size')[0]!.severity).toBe('warning');
  });

  it('does not throw on garbage', () => {
    expect(toScalerConfig(null as never).ok).toBe(false);
    expect(toScalerConfig({ version: 1, scalers: 'x' } as never).ok).toBe(false);
    expect(toScalerConfig({ version: 1, scalers: [null] } as never).ok).toBe(false);
  });
});

describe('parseKiciScalerConfig', () => {
  it('returns the config and warnings, or throws a ConfigError naming kici paths', () => {
    const { config, warnings } = parseKiciScalerConfig(example());
    expect(config.scalers).toHaveLength(2);
    expect(warnings.length).toBeGreaterThan(0);
    let error: unknown;
    try {
      parseKiciScalerConfig(minimal({ roles: ['builder'] }));
    } catch (e) {
      error = e;
    }
    expect(isConfigError(error)).toBe(true);
    expect((error as Error).message).toContain('scalers[0].roles');
  });
});
