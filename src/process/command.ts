/**
 * The argv and env contract of the process backend: the placeholders a
 * command's arguments may hold and the env variables every agent gets.
 */
import { leaseEnv } from '../fence/index.js';
import type { SpawnRequest } from '../manager/index.js';

/**
 * What `ProcessBackend` runs for an agent, as argv (never a shell string):
 * one command for every scaler, a command per scaler name, or a function of
 * the request. Arguments may hold the placeholders listed in `docs/process.md`.
 */
export type ProcessCommand =
  | readonly string[]
  | Readonly<Record<string, readonly string[]>>
  | ((request: SpawnRequest) => readonly string[]);

/** The value of each placeholder for one request (absent values render as ''). */
export function placeholderValues(request: SpawnRequest): Record<string, string> {
  const { requests, limits } = request.resources;
  const cpus = limits.cpus ?? requests.cpus;
  const memoryBytes = limits.memBytes ?? requests.memBytes;
  const gpus = request.devices?.['nvidia.com/gpu'] ?? [];
  return {
    agentId: request.agentId,
    scaler: request.scaler,
    jobId: request.jobId ?? '',
    labels: request.labels.join(','),
    cpus: String(cpus),
    memoryBytes: String(memoryBytes),
    gpus: gpus.join(','),
  };
}

/** The placeholder names, `{name}` in an argument. */
export const PLACEHOLDERS = [
  'agentId',
  'scaler',
  'jobId',
  'labels',
  'cpus',
  'memoryBytes',
  'gpus',
] as const;

const PLACEHOLDER = /\{([A-Za-z]+)\}/g;

/** Check a command: a non-empty array of strings whose placeholders are all known. */
export function checkArgv(argv: unknown, where: string): readonly string[] {
  if (!Array.isArray(argv) || argv.length === 0 || !argv.every((a) => typeof a === 'string')) {
    throw new TypeError(
      `Expected \`${where}\` to be a non-empty array of strings (argv, never a shell string), got \`${JSON.stringify(argv)}\``,
    );
  }
  if (argv[0] === '') throw new TypeError(`Expected \`${where}[0]\` to name a program, got ''`);
  for (const arg of argv as string[]) {
    for (const match of arg.matchAll(PLACEHOLDER)) {
      if (!(PLACEHOLDERS as readonly string[]).includes(match[1]!)) {
        throw new TypeError(
          `Unknown placeholder \`{${match[1]}}\` in \`${where}\`: the accepted placeholders are ${PLACEHOLDERS.map((p) => `{${p}}`).join(', ')}`,
        );
      }
    }
  }
  return argv as string[];
}

/** The argv for `request`: `source` chosen by scaler when a record, placeholders filled in. */
export function renderArgv(source: ProcessCommand, request: SpawnRequest): string[] {
  let argv: unknown;
  if (typeof source === 'function') argv = source(request);
  else if (Array.isArray(source)) argv = source;
  else {
    argv = (source as Record<string, readonly string[]>)[request.scaler];
    if (argv === undefined) {
      throw new TypeError(
        `The process backend has no command for scaler \`${request.scaler}\`: its commands are for ${Object.keys(source).join(', ')}`,
      );
    }
  }
  const checked = checkArgv(argv, 'command');
  const values = placeholderValues(request);
  return checked.map((arg) => arg.replace(PLACEHOLDER, (_, name: string) => values[name] ?? ''));
}

/** The env variables the backend sets for `request` (before the host's extra env). */
export function agentEnv(request: SpawnRequest, passLeases: boolean): Record<string, string> {
  const values = placeholderValues(request);
  const env: Record<string, string> = {
    SCALER_AGENT_ID: values.agentId!,
    SCALER_SCALER: values.scaler!,
    SCALER_LABELS: values.labels!,
    SCALER_CPUS: values.cpus!,
    SCALER_MEMORY_BYTES: values.memoryBytes!,
  };
  if (request.jobId !== undefined) env.SCALER_JOB_ID = request.jobId;
  if (request.devices !== undefined) {
    env.SCALER_DEVICES = JSON.stringify(request.devices);
    const gpus = request.devices['nvidia.com/gpu'];
    if (gpus !== undefined) env.CUDA_VISIBLE_DEVICES = gpus.join(',');
  }
  if (passLeases) Object.assign(env, leaseEnv(request.leases));
  return env;
}
