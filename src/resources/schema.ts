import { z } from 'zod';
import { strictShape } from '../internal/zod-strict.js';
import { capFromConfig, configCapShape } from './cap-fields.js';
import type { QuantityOptions } from './convention.js';
import { readLayer, type ShapeIssue } from './shape.js';
import type { ResourceCap, ResourceRequest, ResourceSpec } from './types.js';

/**
 * A {@link ResourceRequest} after parsing: always the nested form, canonical
 * numbers (cores at millicore precision, whole bytes, whole counts of extended
 * resources by name). `requests` is what the job needs, `limits` what it may use at most.
 */
export type ParsedResourceRequest = Partial<
  Record<
    'requests' | 'limits',
    {
      /** Cores, at millicore precision. */
      cpus?: number;
      /** Whole bytes. */
      memory?: number;
      /** Whole counts of extended resources by name. */
      [extended: `${string}/${string}`]: number | undefined;
    }
  >
>;

/** A cap as written in configuration. */
export interface ResourceCapInput {
  /** Maximum summed CPU: cores or a CPU quantity string. */
  maxCpu?: number | string;
  /** Maximum summed memory: a memory quantity. */
  maxMemory?: number | string;
  /** Maximum summed memory in bytes (instead of `maxMemory`). */
  maxMemoryBytes?: number;
  /** Maximum summed count per extended resource (`{ "nvidia.com/gpu": 4 }`). */
  maxExtended?: Record<string, number | string>;
  /** Extended resources provided without a limit. */
  provides?: readonly string[];
  /** Maximum number of agents (reservations) at once. */
  maxAgents?: number;
  /**
   * Device ids of an extended resource (`{ "nvidia.com/gpu": ["0", "1"] }`),
   * for a machine pool that assigns them; its `maxExtended` count is the number of ids.
   */
  devices?: Record<string, readonly string[]>;
}

// The zod schemas of resourceSchemas, built for one memory convention.
interface ResourceSchemas {
  spec: typeof resourceSpecSchema;
  request: typeof resourceRequestSchema;
  cap: typeof resourceCapSchema;
}

// Every field of a cap can be written in configuration: a field added to the
// table of cap fields (and so to ResourceCap) fails to compile here until it is.
const CONFIG_HAS_EVERY_FIELD: [Exclude<keyof ResourceCap, keyof ResourceCapInput>] extends [never]
  ? true
  : false = true;
void CONFIG_HAS_EVERY_FIELD;

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function buildSpec(opts: QuantityOptions): ResourceSchemas['spec'] {
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

function buildRequest(opts: QuantityOptions): ResourceSchemas['request'] {
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

// A cap's configuration keys after parsing (quantities in cores and bytes).
interface ParsedCapConfig {
  maxMemory?: number;
  maxMemoryBytes?: number;
  maxExtended?: Record<string, number>;
  provides?: string[];
  devices?: Record<string, string[]>;
}

function buildCap(opts: QuantityOptions) {
  return strictShape(configCapShape(opts))
    .superRefine((parsed, ctx) => {
      const cap = parsed as ParsedCapConfig;
      for (const [name, ids] of Object.entries(cap.devices ?? {})) {
        const max = cap.maxExtended?.[name];
        if (max !== undefined && max !== ids.length) {
          ctx.addIssue({
            code: 'custom',
            message: `maxExtended["${name}"] is ${max} but devices["${name}"] lists ${ids.length} ids; give the same number, or leave maxExtended out for it (it is then the number of ids)`,
            path: ['maxExtended', name],
          });
        }
        if (cap.provides?.includes(name)) {
          ctx.addIssue({
            code: 'custom',
            message: `${name} lists device ids, so it is capped by them; remove it from provides`,
            path: ['provides'],
          });
        }
      }
      if (cap.maxMemory !== undefined && cap.maxMemoryBytes !== undefined) {
        ctx.addIssue({
          code: 'custom',
          message: 'Give maxMemory or maxMemoryBytes, not both',
          path: ['maxMemoryBytes'],
        });
      }
      for (const name of cap.provides ?? []) {
        if (cap.maxExtended !== undefined && Object.hasOwn(cap.maxExtended, name)) {
          ctx.addIssue({
            code: 'custom',
            message: `${name} is both capped (maxExtended) and provided without a limit (provides); give one`,
            path: ['provides'],
          });
        }
      }
    })
    .transform((cap) => capFromConfig(cap));
}

/**
 * Build the resource schemas for a convention (`binary`, the default, or `kubernetes`).
 * The exported {@link resourceSpecSchema}, {@link resourceRequestSchema} and
 * {@link resourceCapSchema} are the `binary` ones.
 *
 * @example
 * ```ts
 * import { resourceSchemas } from 'scaler-primitives/resources';
 *
 * const k8s = resourceSchemas({ convention: 'kubernetes' });
 * k8s.spec.parse({ memory: '500M' }); // { memory: 500000000 }
 * ```
 */
export function resourceSchemas(opts: QuantityOptions = {}): {
  /** `{ cpus?, memory? }` -> `{ cpus?: cores, memory?: bytes }`. */
  spec: typeof resourceSpecSchema;
  /** Nested `{ requests?, limits? }` or the flat `{ cpus?, memory? }` (both sides). */
  request: typeof resourceRequestSchema;
  /** `{ maxCpu?, maxMemory? }` -> `{ maxCpu?, maxMemoryBytes? }`. */
  cap: typeof resourceCapSchema;
} {
  return { spec: buildSpec(opts), request: buildRequest(opts), cap: buildCap(opts) };
}

const binary = resourceSchemas();

/**
 * zod schema of a {@link ResourceSpec}: `{ cpus?, memory? }`, unknown keys refused.
 * Parses to canonical numbers (cores, whole bytes); invalid quantities come back
 * as issues at their path.
 *
 * @example
 * ```ts
 * import { resourceSpecSchema } from 'scaler-primitives/resources';
 *
 * resourceSpecSchema.parse({ cpus: '250m', memory: '512Mi' }); // { cpus: 0.25, memory: 536870912 }
 * ```
 */
export const resourceSpecSchema: z.ZodType<
  {
    /** Cores, at millicore precision. */
    cpus?: number;
    /** Whole bytes. */
    memory?: number;
    /** Whole counts of extended resources by name. */
    [extended: `${string}/${string}`]: number | undefined;
  },
  ResourceSpec
> = binary.spec;

/**
 * zod schema of a {@link ResourceRequest}. Accepts the nested form
 * `{ requests?, limits? }` and the flat form `{ cpus?, memory? }`, which
 * declares both sides; always parses to the nested form with canonical numbers.
 *
 * @example
 * ```ts
 * import { resourceRequestSchema } from 'scaler-primitives/resources';
 *
 * resourceRequestSchema.parse({ requests: { cpus: 1 }, limits: { cpus: 2, memory: '4Gi' } });
 * ```
 */
export const resourceRequestSchema: z.ZodType<
  ParsedResourceRequest,
  ResourceRequest | ResourceSpec
> = binary.request;

/**
 * zod schema of a cap in configuration: `{ maxCpu?, maxMemory? }` (quantities)
 * parsed to the {@link ResourceCap} form `{ maxCpu?, maxMemoryBytes? }`.
 * `maxMemoryBytes` (a byte count) is accepted in place of `maxMemory`.
 *
 * @example
 * ```ts
 * import { resourceCapSchema } from 'scaler-primitives/resources';
 *
 * const cap = resourceCapSchema.parse({ maxCpu: 12, maxMemory: '48Gi' }); // { maxCpu: 12, maxMemoryBytes: ... }
 * ```
 */
export const resourceCapSchema: z.ZodType<ResourceCap, ResourceCapInput> = binary.cap;
