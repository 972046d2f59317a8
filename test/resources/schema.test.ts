import {
  resourceCapSchema,
  resourceRequestSchema,
  resourceSchemas,
  resourceSpecSchema,
} from 'scaler-primitives/resources';
import { describe, expect, it } from 'vitest';

const Gi = 1024 ** 3;

describe('resourceSpecSchema', () => {
  it('parses quantities to canonical numbers', () => {
    expect(resourceSpecSchema.parse({ cpus: '500m', memory: '2g' })).toEqual({
      cpus: 0.5,
      memory: 2 * Gi,
    });
  });

  it('reports bad quantities and unknown keys as issues with paths', () => {
    const result = resourceSpecSchema.safeParse({ cpus: '2 cores', memory: '8GB', cpu: 1 });
    expect(result.success).toBe(false);
    const issues = result.error!.issues.map((i) => ({ path: i.path, message: i.message }));
    expect(issues).toContainEqual({
      path: ['cpus'],
      message: expect.stringContaining('"2 cores"'),
    });
    expect(issues).toContainEqual({
      path: ['memory'],
      message: expect.stringContaining('did you mean "8Gi"'),
    });
    expect(issues.some((i) => i.message.includes('cpu'))).toBe(true);
  });
});

describe('resourceRequestSchema', () => {
  it('accepts the nested form', () => {
    expect(
      resourceRequestSchema.parse({ requests: { cpus: 1 }, limits: { memory: '1Gi' } }),
    ).toEqual({ requests: { cpus: 1 }, limits: { memory: Gi } });
  });

  it('reads the legacy flat form as both sides', () => {
    expect(resourceRequestSchema.parse({ cpus: '2', memory: '512m' })).toEqual({
      requests: { cpus: 2, memory: 512 * 1024 ** 2 },
      limits: { cpus: 2, memory: 512 * 1024 ** 2 },
    });
  });

  it('keeps nested paths in issues', () => {
    const result = resourceRequestSchema.safeParse({ limits: { memory: '1.5.5' } });
    expect(result.success).toBe(false);
    expect(result.error!.issues[0]!.path).toEqual(['limits', 'memory']);
  });

  it('refuses a mix of the flat and nested forms, and non-objects', () => {
    expect(resourceRequestSchema.safeParse({ cpus: 1, requests: {} }).success).toBe(false);
    expect(resourceRequestSchema.safeParse('1').success).toBe(false);
    expect(resourceRequestSchema.safeParse([]).success).toBe(false);
    expect(resourceRequestSchema.safeParse(null).success).toBe(false);
  });
});

describe('resourceCapSchema', () => {
  it('turns maxMemory into maxMemoryBytes', () => {
    expect(resourceCapSchema.parse({ maxCpu: '4', maxMemory: '8Gi' })).toEqual({
      maxCpu: 4,
      maxMemoryBytes: 8 * Gi,
    });
    expect(resourceCapSchema.parse({ maxMemoryBytes: 1024 })).toEqual({ maxMemoryBytes: 1024 });
    expect(resourceCapSchema.parse({})).toEqual({});
  });

  it('refuses both memory forms at once, bad values and unknown keys', () => {
    const both = resourceCapSchema.safeParse({ maxMemory: '1Gi', maxMemoryBytes: 1 });
    expect(both.success).toBe(false);
    expect(both.error!.issues[0]!.path).toEqual(['maxMemoryBytes']);
    expect(resourceCapSchema.safeParse({ maxCpu: -1 }).success).toBe(false);
    expect(resourceCapSchema.safeParse({ maxMemoryBytes: 1.5 }).success).toBe(false);
    expect(resourceCapSchema.safeParse({ maxMem: '1Gi' }).success).toBe(false);
  });
});

describe('resourceSchemas', () => {
  it('builds schemas for the kubernetes convention', () => {
    const k8s = resourceSchemas({ convention: 'kubernetes' });
    expect(k8s.spec.parse({ memory: '500M' })).toEqual({ memory: 500_000_000 });
    expect(k8s.cap.parse({ maxMemory: '1G' })).toEqual({ maxMemoryBytes: 1e9 });
    expect(k8s.request.safeParse({ requests: { memory: '1g' } }).success).toBe(false);
    expect(k8s.spec.parse({ cpus: '1e3', memory: '500m' })).toEqual({ cpus: 1000, memory: 1 });
  });
});
