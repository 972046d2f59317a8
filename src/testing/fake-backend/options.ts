/**
 * FakeBackend's checked options and scripts.
 * @internal
 */
import { type Clock, systemClock } from '../../clock.js';
import type {
  FakeBackendHost,
  FakeBackendOptions,
  FakeCall,
  FakeMethod,
  FakeScript,
} from './types.js';

/** Calls of `method` held until `released` settles, with the uses left. @internal */
export interface Hold {
  method: FakeMethod;
  left: number;
  released: Promise<void>;
}

/** A scripted answer with its uses left. @internal */
export interface Rule extends FakeScript {
  left: number;
}

/** @internal */
export const METHODS: readonly FakeMethod[] = ['spawn', 'destroy', 'list', 'shutdown'];

/** FakeBackend's options, checked, with their defaults. @internal */
export interface ReadOptions {
  clock: Clock;
  name: string;
  latency: Partial<Record<FakeMethod, number>>;
  registerAfterMs: number | undefined;
  jobDurationMs: number | undefined;
  runIdOf: (jobId: string) => string;
  manager: FakeBackendHost | undefined;
  onCall: ((call: FakeCall) => void) | undefined;
  list: boolean;
  shutdown: boolean;
}

/**
 * Check FakeBackend's options (unknown keys are refused) and fill in defaults.
 * @throws TypeError for an unknown option or a value out of range.
 * @internal
 */
export function readFakeBackendOptions(options: FakeBackendOptions): ReadOptions {
  const known = [
    'clock',
    'name',
    'manager',
    'latencyMs',
    'registerAfterMs',
    'jobDurationMs',
    'runIdOf',
    'onCall',
    'list',
    'shutdown',
  ];
  for (const key of Object.keys(options ?? {})) {
    if (!known.includes(key)) {
      throw new TypeError(
        `Unknown FakeBackend option \`${key}\`: the accepted options are ${known.map((k) => `\`${k}\``).join(', ')}`,
      );
    }
  }
  const clock = options.clock ?? systemClock;
  const name = options.name ?? 'fake';
  const given = options.latencyMs ?? 0;
  const latency: Partial<Record<FakeMethod, number>> = {};
  if (typeof given === 'number') {
    for (const method of METHODS) latency[method] = checkMs('latencyMs', given);
  } else {
    for (const [method, ms] of Object.entries(given)) {
      if (!METHODS.includes(method as FakeMethod)) {
        throw new TypeError(
          `Unknown method \`${method}\` in \`latencyMs\`: use spawn, destroy, list or shutdown`,
        );
      }
      latency[method as FakeMethod] = checkMs(`latencyMs.${method}`, ms);
    }
  }
  const registerAfterMs =
    options.registerAfterMs === undefined
      ? undefined
      : checkMs('registerAfterMs', options.registerAfterMs);
  const jobDurationMs =
    options.jobDurationMs === undefined
      ? undefined
      : checkMs('jobDurationMs', options.jobDurationMs, true);
  const runIdOf = options.runIdOf ?? ((jobId: string) => `run-${jobId}`);
  if (options.onCall !== undefined && typeof options.onCall !== 'function') {
    throw new TypeError(`Expected \`onCall\` to be a function, got \`${typeof options.onCall}\``);
  }
  for (const key of ['list', 'shutdown'] as const) {
    if (options[key] !== undefined && typeof options[key] !== 'boolean') {
      throw new TypeError(`Expected \`${key}\` to be a boolean, got \`${String(options[key])}\``);
    }
  }
  return {
    clock,
    name,
    latency,
    registerAfterMs,
    jobDurationMs,
    runIdOf,
    manager: options.manager,
    onCall: options.onCall,
    list: options.list ?? true,
    shutdown: options.shutdown ?? true,
  };
}

/** Check a scripted answer and make it a rule with its count of uses left. @internal */
export function readScript(rule: FakeScript): Rule {
  const method = rule.method ?? 'spawn';
  if (!METHODS.includes(method)) {
    throw new TypeError(
      `Expected \`method\` to be spawn, destroy, list or shutdown, got \`${String(method)}\``,
    );
  }
  const times = rule.times ?? 1;
  if (!(times === Number.POSITIVE_INFINITY || (Number.isInteger(times) && times >= 1))) {
    throw new TypeError(
      `Expected \`times\` to be an integer >= 1 or Infinity, got \`${String(times)}\``,
    );
  }
  if (rule.latencyMs !== undefined) checkMs('latencyMs', rule.latencyMs);
  return { ...rule, method, left: times };
}

/** A delay in ms: a number >= 0, finite unless `infinite`. @internal */
export function checkMs(name: string, value: unknown, infinite = false): number {
  if (
    typeof value !== 'number' ||
    Number.isNaN(value) ||
    value < 0 ||
    (!infinite && !Number.isFinite(value))
  ) {
    throw new TypeError(
      `Expected \`${name}\` to be a ${infinite ? '' : 'finite '}number >= 0, got \`${String(value)}\``,
    );
  }
  return value;
}
