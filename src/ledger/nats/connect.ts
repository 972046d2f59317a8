/**
 * How a NatsPoolLedger comes up: its options checked, a connection opened
 * (or the caller's used), the bucket opened or created, each with retries
 * bounded by `timeoutMs`, and the messages that say what to check when one
 * of them cannot be done.
 */
import { type JetStreamClient, jetstream } from '@nats-io/jetstream';
import { type KV, Kvm } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/transport-node';
import { monotonicNow, sleep } from '../../clock.js';
import { LedgerUnavailableError, ScalerError } from '../../errors/index.js';
import { isConnectionClosed } from '../../internal/nats-errors.js';
import { testHooksOf } from '../../internal/test-hooks.js';
import { positiveOption } from '../checks.js';
import { checkLedgerTelemetryOptions } from '../telemetry.js';
import {
  assertKnownKeys,
  NATS_POOL_LEDGER_HOOK_KEYS,
  NATS_POOL_LEDGER_OPTION_KEYS,
  type NatsPoolLedgerHooks,
} from './options.js';
import { SERVER_VERSION_POLICIES } from './server-version.js';
import type { NatsPoolLedgerOptions } from './types.js';

const DEFAULT_BUCKET = 'scaler-pools';
const DEFAULT_LEASE_MS = 30_000;
const DEFAULT_TIMEOUT_MS = 10_000;
const BUCKET_NAME = /^[-\w]+$/;

/** The options with their defaults applied, as the ledger keeps them. */
export type CheckedOptions = NatsPoolLedgerOptions & {
  bucket: string;
  leaseMs: number;
  leaseMarginMs: number;
  serverVersionPolicy: 'warn' | 'refuse' | 'ignore';
  timeoutMs: number;
  replicas: number;
};

/**
 * Check `options` as `NatsPoolLedger.connect` documents (unknown keys,
 * instanceId, exactly one of `nc` and `servers`, names and ranges) and apply
 * the defaults. Test hooks ride along under their symbol key.
 */
export function checkConnectOptions(options: NatsPoolLedgerOptions): CheckedOptions {
  assertKnownKeys('NatsPoolLedger options', options, NATS_POOL_LEDGER_OPTION_KEYS);
  const hooks = testHooksOf<NatsPoolLedgerHooks>(options);
  assertKnownKeys('NatsPoolLedger hooks', hooks, NATS_POOL_LEDGER_HOOK_KEYS);
  checkLedgerTelemetryOptions(options);
  if (typeof options?.instanceId !== 'string' || options.instanceId === '') {
    throw new TypeError(
      `Expected \`instanceId\` to be a non-empty string, got \`${String(options?.instanceId)}\``,
    );
  }
  if ((options.nc === undefined) === (options.servers === undefined)) {
    throw new TypeError('Expected exactly one of `nc` (a NatsConnection) and `servers` (URLs)');
  }
  const bucket = options.bucket ?? DEFAULT_BUCKET;
  if (typeof bucket !== 'string' || !BUCKET_NAME.test(bucket)) {
    throw new TypeError(
      `Expected \`bucket\` to be a KV bucket name of letters, digits, '-' and '_', got \`${String(bucket)}\``,
    );
  }
  const leaseMs = positiveOption('leaseMs', options.leaseMs, DEFAULT_LEASE_MS);
  if (leaseMs < 300) {
    throw new TypeError(`Expected \`leaseMs\` to be at least 300, got \`${leaseMs}\``);
  }
  // The default is capped at half a short lease (a margin must stay below the lease).
  const leaseMarginMs =
    options.leaseMarginMs ??
    Math.min(Math.max(1000, Math.ceil(leaseMs / 10)), Math.floor(leaseMs / 2));
  if (
    typeof leaseMarginMs !== 'number' ||
    !Number.isFinite(leaseMarginMs) ||
    leaseMarginMs < 0 ||
    leaseMarginMs >= leaseMs
  ) {
    throw new TypeError(
      `Expected \`leaseMarginMs\` to be a finite number >= 0 and < \`leaseMs\` (${leaseMs}), got \`${String(leaseMarginMs)}\``,
    );
  }
  const serverVersionPolicy = options.serverVersionPolicy ?? 'warn';
  if (!(SERVER_VERSION_POLICIES as readonly unknown[]).includes(serverVersionPolicy)) {
    throw new TypeError(
      `Expected \`serverVersionPolicy\` to be 'warn', 'refuse' or 'ignore', got \`${String(serverVersionPolicy)}\``,
    );
  }
  const timeoutMs = positiveOption('timeoutMs', options.timeoutMs, DEFAULT_TIMEOUT_MS);
  const replicas = options.replicas ?? 1;
  if (!Number.isInteger(replicas) || replicas < 1 || replicas > 5) {
    throw new TypeError(
      `Expected \`replicas\` to be an integer from 1 to 5, got \`${String(replicas)}\``,
    );
  }
  return { ...options, bucket, leaseMs, leaseMarginMs, serverVersionPolicy, timeoutMs, replicas };
}

/** The caller's connection, or a new one to `servers` that the ledger owns and closes. */
export async function openConnection(
  options: CheckedOptions,
): Promise<{ nc: NatsConnection; owns: boolean }> {
  if (options.nc !== undefined) return { nc: options.nc, owns: false };
  const { connect } = await import('@nats-io/transport-node');
  try {
    const nc = await connect({
      servers: options.servers,
      name: `scaler-primitives ledger ${options.instanceId}`,
      maxReconnectAttempts: -1,
      reconnectTimeWait: 250,
      timeout: Math.min(options.timeoutMs, 5000),
      // A server cut off from this client (or from its cluster) is noticed within
      // about a lease, not after the default 4 minutes, and another server is tried.
      pingInterval: Math.max(1000, Math.min(30_000, Math.floor(options.leaseMs / 3))),
      maxPingOut: 2,
    });
    return { nc, owns: true };
  } catch (error) {
    throw new LedgerUnavailableError(
      '',
      `Cannot connect to NATS at ${String(options.servers)}: ${describeNatsError(error)}. Check that the server runs and that JetStream is enabled (nats-server -js).`,
      { cause: error },
    );
  }
}

/**
 * Run `attempt` until it succeeds, retrying with backoff until `deadline`
 * (monotonic ms) or a closed connection; then throw what `fail` makes of the
 * last error.
 */
export async function retryUntil<T>(
  deadline: number,
  attempt: () => Promise<T>,
  fail: (error: unknown) => Error,
): Promise<T> {
  for (let n = 0; ; n++) {
    try {
      return await attempt();
    } catch (error) {
      // A typed refusal (another live process holds the instance id) is final.
      if (error instanceof ScalerError) throw error;
      if (monotonicNow() >= deadline || isConnectionClosed(error)) throw fail(error);
      await sleep(backoff(n, 50, 1000));
    }
  }
}

/** Open (or create) the ledger's bucket through JetStream, within the options' timeout. */
export async function openBucket(
  nc: NatsConnection,
  options: CheckedOptions,
  deadline: number,
): Promise<{ js: JetStreamClient; kv: KV }> {
  const { bucket, replicas } = options;
  const js = jetstream(nc, { timeout: Math.min(options.timeoutMs, 2000) });
  const kv = await retryUntil(
    deadline,
    // Gets go to the stream leader (no direct get), so a read never trails a write.
    () => new Kvm(js).create(bucket, { replicas, history: 1, allow_direct: false }),
    (error) =>
      new LedgerUnavailableError(
        '',
        `Cannot open the NATS KV bucket ${JSON.stringify(bucket)}: ${describeNatsError(error)}. Check that JetStream is enabled and, in a cluster, that enough servers for ${replicas} replica(s) are up.`,
        { cause: error },
      ),
  );
  return { js, kv };
}

/** Full jitter: a random delay up to `base * 2^attempt`, capped. */
export function backoff(attempt: number, baseMs: number, capMs: number): number {
  return Math.random() * Math.min(capMs, baseMs * 2 ** Math.min(attempt, 16));
}

/** A short description of a NATS failure for messages: its message and JetStream code. */
export function describeNatsError(error: unknown): string {
  if (error instanceof Error) {
    const code = (error as { code?: unknown }).code;
    return code === undefined ? `${error.name}: ${error.message}` : `${error.message} (${code})`;
  }
  return String(error);
}
