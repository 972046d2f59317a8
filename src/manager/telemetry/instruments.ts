/**
 * The manager's counters and histograms: what is recorded per request, spawn
 * or event. Counters are Tallies (totalled in memory, observed at collection,
 * no allocation per add); each histogram records with an attribute object
 * made once per key. `scaler.spawn.duration` exists only when asked for.
 */
import {
  attributes,
  KeyedCache,
  type KeyPart,
  type OtelAttributes,
  type OtelHistogram,
  type OtelMeter,
  SLOW_BUCKETS,
  Tally,
} from '../../internal/telemetry/index.js';

/** The instruments of one manager. @internal */
export interface ManagerInstruments {
  readonly requests: Tally;
  readonly spawns: Tally;
  readonly destroyed: Tally;
  readonly lost: Tally;
  /** Only with `spawnDurationHistogram` (one SDK record, attributes hashed, per spawn). */
  readonly spawnDuration: OtelHistogram | undefined;
  readonly registration: OtelHistogram;
  readonly jobWait: OtelHistogram;
  /** Keyed by (scaler, warm, failed stage). */
  readonly spawnAttributes: KeyedCache<OtelAttributes>;
  /** Keyed by scaler. */
  readonly waitAttributes: KeyedCache<OtelAttributes>;
  /** Keyed by (scaler, warm). */
  readonly registrationAttributes: KeyedCache<OtelAttributes>;
}

/**
 * Create the manager's counters and histograms on `meter`.
 * @internal
 */
export function createManagerInstruments(
  meter: OtelMeter,
  spawnDurationHistogram: boolean,
): ManagerInstruments {
  const spawnAttributes = new KeyedCache(describeSpawn);
  const seconds = (name: string, description: string) =>
    meter.createHistogram(name, {
      description,
      unit: 's',
      advice: { explicitBucketBoundaries: SLOW_BUCKETS },
    });
  const requests = new Tally(
    meter,
    'scaler.scale.requests',
    {
      description: 'requestScale answers, by result kind and the limit that refused.',
      unit: '{request}',
    },
    (result, name, limit, pool, dimension) =>
      attributes({
        'scaler.result': result,
        'scaler.name': name,
        'scaler.limit': limit,
        'scaler.pool': pool,
        'scaler.limit.dimension': dimension,
      }),
  );
  const spawns = new Tally(
    meter,
    'scaler.spawns',
    {
      description: 'Spawn attempts that got capacity, by outcome and the stage that failed.',
      unit: '{agent}',
    },
    (name, warm, failedAt) => spawnAttributes.get(name, warm, failedAt),
  );
  const spawnDuration = spawnDurationHistogram
    ? seconds('scaler.spawn.duration', "Time the backend's spawn call took, by outcome.")
    : undefined;
  const registration = seconds(
    'scaler.agent.registration.duration',
    'Time from the start of a spawn to the agent registering.',
  );
  const jobWait = seconds(
    'scaler.job.wait.duration',
    'Time from a job first refused for capacity (at-capacity, backing-off) to the answer that spawned its agent; jobs spawned at their first request are not recorded.',
  );
  const destroyed = new Tally(
    meter,
    'scaler.agents.destroyed',
    {
      description: 'Agents destroyed, by reason (idle, pruned, drain, lifetime, excess, ...).',
      unit: '{agent}',
    },
    (name, reason) => ({ 'scaler.name': name, 'scaler.reason': reason }),
  );
  const lost = new Tally(
    meter,
    'scaler.reservations.lost',
    {
      description:
        'Pool rows of running agents found gone (removed while the lease had lapsed, or by an operator).',
      unit: '{reservation}',
    },
    (name, pool) => ({ 'scaler.name': name, 'scaler.pool': pool }),
  );
  return {
    requests,
    spawns,
    destroyed,
    lost,
    spawnDuration,
    registration,
    jobWait,
    spawnAttributes,
    waitAttributes: new KeyedCache<OtelAttributes>((name) => ({ 'scaler.name': name })),
    registrationAttributes: new KeyedCache<OtelAttributes>((name, warm) => ({
      'scaler.name': name,
      'scaler.warm': warm,
    })),
  };
}

/** The attributes of a spawn outcome: a failure names its stage (`reserve`, `spawn`). */
function describeSpawn(name: KeyPart, warm: KeyPart, failedAt: KeyPart): OtelAttributes {
  const out: OtelAttributes = {
    'scaler.name': name,
    'scaler.warm': warm,
    'scaler.outcome': failedAt === undefined ? 'spawned' : 'failed',
  };
  if (failedAt !== undefined) out['scaler.stage'] = failedAt;
  return out;
}
