import { type JetStreamManager, jetstreamManager } from '@nats-io/jetstream';
import { type KV, Kvm } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/transport-node';
import { isStreamNotFound, toNatsRequestError } from '../../internal/nats-errors.js';
import { BUCKET, STREAM } from '../names.js';
import { checkHandle, checkNatsOptions } from './check.js';

/**
 * Options of {@link openOrCreateCapsBucket} and {@link openCapsBucket}.
 */
export interface CapsBucketOptions {
  /**
   * How long each JetStream API request may take, in milliseconds.
   * @default 5000
   */
  timeout?: number;
}

const DESCRIPTION = 'Resource caps the swarm controller sets for each agent';
const infoSubject = `$JS.API.STREAM.INFO.${STREAM}`;

async function manager(nc: NatsConnection, options: CapsBucketOptions): Promise<JetStreamManager> {
  try {
    return await jetstreamManager(nc, { timeout: options.timeout ?? 5000 });
  } catch (error) {
    throw toNatsRequestError(
      error,
      '$JS.API.INFO',
      'Reaching JetStream for the caps bucket "agent-limits"',
      'Is JetStream enabled on the server and for this account?',
    );
  }
}

/** True when the stream exists; false only for "stream not found" (code 10059). */
async function bucketExists(jsm: JetStreamManager): Promise<boolean> {
  try {
    await jsm.streams.info(STREAM);
    return true;
  } catch (error) {
    if (isStreamNotFound(error)) return false;
    throw toNatsRequestError(error, infoSubject, 'Looking up the caps bucket "agent-limits"');
  }
}

// A bound handle reads through the stream leader (not direct get), so the
// revisions it returns are a sound base for a compare-and-set.
function bind(nc: NatsConnection, options: CapsBucketOptions): Promise<KV> {
  return new Kvm(nc).open(BUCKET, { timeout: options.timeout ?? 5000 });
}

/**
 * Open the `agent-limits` bucket for writing, creating it when (and only
 * when) it does not exist: history 1 (a host wants the current value) and
 * `allow_direct` on, so hosts can read with one direct get.
 *
 * **Controller side.** Any failure other than "stream not found" (a timeout,
 * a refused permission, JetStream disabled) is raised and nothing is created.
 * Two controllers racing to create it both succeed (JetStream accepts an
 * identical stream configuration twice).
 *
 * @param nc - A NATS connection (nats.js v3).
 * @param options - `timeout`.
 * @returns A nats.js KV handle whose reads go through the stream leader.
 * @throws {@link errors!NatsRequestError} when JetStream cannot be reached or the bucket cannot be looked up or created.
 *
 * @example
 * ```ts
 * import type { NatsConnection } from '@nats-io/transport-node';
 * import { openOrCreateCapsBucket, writeAgentCaps } from 'scaler-primitives/agent-caps/nats';
 * declare const nc: NatsConnection;
 * const kv = await openOrCreateCapsBucket(nc);
 * await writeAgentCaps(kv, 'iris', { cpuQuota: '400%', memoryMax: '8G' });
 * ```
 */
export async function openOrCreateCapsBucket(
  nc: NatsConnection,
  options?: {
    /**
     * How long each JetStream API request may take, in milliseconds.
     * @default 5000
     */
    timeout?: number;
  },
): Promise<KV> {
  checkHandle(nc, 'nc', ['request']);
  const opts = checkNatsOptions<CapsBucketOptions>(options, ['timeout'], 'bucket options');
  const jsm = await manager(nc, opts);
  if (!(await bucketExists(jsm))) {
    try {
      // allow_direct explicitly: on a server without direct get this fails
      // here, loudly, instead of making a bucket no host can read.
      await new Kvm(nc).create(BUCKET, {
        history: 1,
        description: DESCRIPTION,
        allow_direct: true,
        timeout: opts.timeout ?? 5000,
      });
    } catch (error) {
      throw toNatsRequestError(
        error,
        `$JS.API.STREAM.CREATE.${STREAM}`,
        'Creating the caps bucket "agent-limits"',
      );
    }
  }
  return bind(nc, opts);
}

/**
 * Open the `agent-limits` bucket, or return `null` when nothing has created
 * it yet (which reads the same as no caps for every agent). Never creates it.
 *
 * @param nc - A NATS connection (nats.js v3).
 * @param options - `timeout`.
 * @returns A nats.js KV handle whose reads go through the stream leader, or `null`.
 * @throws {@link errors!NatsRequestError} for every failure other than the bucket not existing.
 *
 * @example
 * ```ts
 * import type { NatsConnection } from '@nats-io/transport-node';
 * import { openCapsBucket } from 'scaler-primitives/agent-caps/nats';
 * declare const nc: NatsConnection;
 * const kv = await openCapsBucket(nc);
 * if (kv === null) console.log('no caps published yet');
 * ```
 */
export async function openCapsBucket(
  nc: NatsConnection,
  options?: {
    /**
     * How long each JetStream API request may take, in milliseconds.
     * @default 5000
     */
    timeout?: number;
  },
): Promise<KV | null> {
  checkHandle(nc, 'nc', ['request']);
  const opts = checkNatsOptions<CapsBucketOptions>(options, ['timeout'], 'bucket options');
  const jsm = await manager(nc, opts);
  return (await bucketExists(jsm)) ? bind(nc, opts) : null;
}
