import { z } from 'zod';
import { type ParseMemoryOptions, parseCpu, parseMemory } from './quantity.js';
import { readLayer, type ShapeIssue } from './shape.js';
import type { ResourceCap, ResourceRequest, ResourceSpec } from './types.js';

function quantity(parse: (value: number | string) => number) {
  return z.union([z.number(), z.string()]).transform((value, ctx) => {
    try {
      return parse(value);
    } catch (error) {
      ctx.addIssue({ code: 'custom', message: (error as Error).message });
      return z.NEVER;
    }
  });
}

/** A {@link ResourceSpec} after parsing: canonical numbers. */
export interface ParsedResourceSpec {
  /** Cores, at millicore precision. */
  cpus?: number;
  /** Whole bytes. */
  memory?: number;
  /** Whole counts of extended resources by name. */
  [extended: `${string}/${string}`]: number | undefined;
}

/** A {@link ResourceRequest} after parsing: always the nested form, canonical numbers. */
export interface ParsedResourceRequest {
  /** What the job needs. */
  requests?: ParsedResourceSpec;
  /** What the job may use at most. */
  limits?: ParsedResourceSpec;
}

/** A cap as written in configuration. */
export interface ResourceCapInput {
  /** Maximum summed CPU: cores or a CPU quantity string. */
  maxCpu?: number | string;
  /** Maximum summed memory: a memory quantity. */
  maxMemory?: number | string;
  /** Maximum summed memory in bytes (instead of `maxMemory`). */
  maxMemoryBytes?: number;
}

/** The zod schemas of {@link resourceSchemas}, built for one memory convention. */
export interface ResourceSchemas {
  /** `{ cpus?, memory? }` -> `{ cpus?: cores, memory?: bytes }`. */
  spec: z.ZodType<ParsedResourceSpec, ResourceSpec>;
  /** Nested `{ requests?, limits? }` or legacy flat `{ cpus?, memory? }` (both sides). */
  request: z.ZodType<ParsedResourceRequest, ResourceRequest | ResourceSpec>;
  /** `{ maxCpu?, maxMemory? }` -> `{ maxCpu?, maxMemoryBytes? }`. */
  cap: z.ZodType<ResourceCap, ResourceCapInput>;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function buildSpec(opts: ParseMemoryOptions): ResourceSchemas['spec'] {
  return z
    .custom<Record<string, unknown>>(isObject, {
      message: 'Expected an object { cpus?, memory?, <extended>? }',
    })
    .transform((value, ctx) => {
      const issues: ShapeIssue[] = [];
      const parsed = readLayer({ requests: value }, 'spec', opts, issues);
      if (issues.length > 0) return report(issues, ctx, 1);
      return parsed.requests ?? {};
    }) as unknown as ResourceSchemas['spec'];
}

function buildRequest(opts: ParseMemoryOptions): ResourceSchemas['request'] {
  return z
    .custom<Record<string, unknown>>(isObject, {
      message: 'Expected an object: { requests?, limits? } or the flat form { cpus?, memory? }',
    })
    .transform((value, ctx) => {
      const issues: ShapeIssue[] = [];
      const parsed = readLayer(value, 'the', opts, issues);
      if (issues.length > 0) return report(issues, ctx, 0);
      return parsed;
    }) as unknown as ResourceSchemas['request'];
}

function report(issues: ShapeIssue[], ctx: z.RefinementCtx, drop: number): never {
  for (const issue of issues) {
    ctx.addIssue({ code: 'custom', message: issue.error.message, path: issue.path.slice(drop) });
  }
  return z.NEVER;
}

function buildCap(opts: ParseMemoryOptions) {
  return z
    .strictObject({
      maxCpu: quantity((v) => parseCpu(v, opts)).optional(),
      maxMemory: quantity((v) => parseMemory(v, opts)).optional(),
      maxMemoryBytes: z.number().int().nonnegative().optional(),
    })
    .superRefine((cap, ctx) => {
      if (cap.maxMemory !== undefined && cap.maxMemoryBytes !== undefined) {
        ctx.addIssue({
          code: 'custom',
          message: 'Give maxMemory or maxMemoryBytes, not both',
          path: ['maxMemoryBytes'],
        });
      }
    })
    .transform((cap) => {
      const out: { maxCpu?: number; maxMemoryBytes?: number } = {};
      if (cap.maxCpu !== undefined) out.maxCpu = cap.maxCpu;
      const memory = cap.maxMemory ?? cap.maxMemoryBytes;
      if (memory !== undefined) out.maxMemoryBytes = memory;
      return out;
    });
}

/**
 * Build the resource schemas for a memory convention (see {@link ParseMemoryOptions}).
 * The exported {@link resourceSpecSchema}, {@link resourceRequestSchema} and
 * {@link resourceCapSchema} are the `binary` ones.
 *
 * @example
 * ```ts
 * const k8s = resourceSchemas({ convention: 'kubernetes' });
 * k8s.spec.parse({ memory: '500M' }); // { memory: 500000000 }
 * ```
 */
export function resourceSchemas(opts: ParseMemoryOptions = {}): ResourceSchemas {
  return { spec: buildSpec(opts), request: buildRequest(opts), cap: buildCap(opts) };
}

const binary = resourceSchemas();

/**
 * zod schema of a {@link ResourceSpec}: `{ cpus?, memory? }`, unknown keys refused.
 * Parses to canonical numbers (cores, whole bytes); invalid quantities come back
 * as issues at their path.
 */
export const resourceSpecSchema: ResourceSchemas['spec'] = binary.spec;

/**
 * zod schema of a {@link ResourceRequest}. Accepts the nested form
 * `{ requests?, limits? }` and the legacy flat form `{ cpus?, memory? }`, which
 * declares both sides; always parses to the nested form with canonical numbers.
 */
export const resourceRequestSchema: ResourceSchemas['request'] = binary.request;

/**
 * zod schema of a cap in configuration: `{ maxCpu?, maxMemory? }` (quantities)
 * parsed to the {@link ResourceCap} form `{ maxCpu?, maxMemoryBytes? }`.
 * `maxMemoryBytes` (a byte count) is accepted in place of `maxMemory`.
 */
export const resourceCapSchema: ResourceSchemas['cap'] = binary.cap;
