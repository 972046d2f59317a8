/**
 * Manager telemetry (OpenTelemetry metrics and spans). Built only when the host
 * passed a provider; the manager otherwise holds `undefined` and each call site
 * is an optional call, so nothing runs and nothing is allocated per request.
 *
 * Gauges are read from the manager's status at collection time (nothing per
 * operation); counters and histograms come from the spawn path and the events
 * the manager already emits. Durations run on the manager's clock, so a
 * `TestClock` drives them as it drives every timing rule.
 */
import {
  AttributeCache,
  attributes,
  contextWithSpan,
  failSpan,
  type OtelAttributes,
  type OtelCounter,
  type OtelHistogram,
  type OtelMeter,
  type OtelObservableResult,
  type OtelSpan,
  type OtelTracer,
  offerParentSpan,
  resolveProviders,
  SLOW_BUCKETS,
  Tally,
  type TelemetryOptions,
  withdrawParentSpan,
} from '../internal/telemetry/index.js';
import type { ReserveResult } from '../ledger/types.js';
import type { ResourceCap } from '../resources/types.js';
import type { AgentRecord } from './agents.js';
import type { FleetCore } from './core.js';
import type { ScaleResult, ScalerEvent, ScalerStatus, Usage } from './types.js';

/** Jobs whose first capacity refusal is remembered, at most (oldest forgotten first). */
const MAX_WAITING_JOBS = 10_000;

/** What the telemetry reads from the manager. @internal */
export interface ManagerView {
  core: FleetCore;
  status(): ScalerStatus;
}

/**
 * The telemetry of one manager, or `undefined` when no provider was given.
 * `view` is called lazily (the manager's rooms exist by the first use).
 *
 * @throws TypeError for a provider without `getMeter`/`getTracer`.
 * @internal
 */
export function createManagerTelemetry(
  options: TelemetryOptions,
  view: () => ManagerView,
): ManagerTelemetry | undefined {
  const { meter, tracer } = resolveProviders(options);
  if (meter === undefined && tracer === undefined) return undefined;
  return new ManagerTelemetry(meter, tracer, view);
}

/** Instruments and spans of one manager. @internal */
export class ManagerTelemetry {
  readonly #view: () => ManagerView;
  readonly #tracer: OtelTracer | undefined;
  /** The open `requestScale` span of each job. */
  readonly #scaleSpans = new Map<string, OtelSpan>();
  /** When each job was first refused for capacity (manager clock, ms). */
  readonly #waiting = new Map<string, number>();
  readonly #requests: Tally | undefined;
  readonly #spawns: Tally | undefined;
  readonly #attributes = new AttributeCache();
  readonly #spawnAttributes = new Map<string, OtelAttributes>();
  readonly #spawnDuration: OtelHistogram | undefined;
  readonly #registration: OtelHistogram | undefined;
  readonly #jobWait: OtelHistogram | undefined;
  readonly #destroyed: OtelCounter | undefined;
  readonly #lost: OtelCounter | undefined;

  constructor(
    meter: OtelMeter | undefined,
    tracer: OtelTracer | undefined,
    view: () => ManagerView,
  ) {
    this.#view = view;
    this.#tracer = tracer;
    if (meter === undefined) return;
    const seconds = (name: string, description: string) =>
      meter.createHistogram(name, {
        description,
        unit: 's',
        advice: { explicitBucketBoundaries: SLOW_BUCKETS },
      });
    this.#requests = new Tally(meter, 'scaler.scale.requests', {
      description: 'requestScale answers, by result kind and the limit that refused.',
      unit: '{request}',
    });
    this.#spawns = new Tally(meter, 'scaler.spawns', {
      description: 'Spawn attempts that got capacity, by outcome and the stage that failed.',
      unit: '{agent}',
    });
    this.#spawnDuration = seconds(
      'scaler.spawn.duration',
      "Time the backend's spawn call took, by outcome.",
    );
    this.#registration = seconds(
      'scaler.agent.registration.duration',
      'Time from the start of a spawn to the agent registering.',
    );
    this.#jobWait = seconds(
      'scaler.job.wait.duration',
      'Time from a job first refused for capacity (at-capacity, backing-off) to the answer that spawned its agent; jobs spawned at their first request are not recorded.',
    );
    this.#destroyed = meter.createCounter('scaler.agents.destroyed', {
      description: 'Agents destroyed, by reason (idle, pruned, drain, lifetime, excess, ...).',
      unit: '{agent}',
    });
    this.#lost = meter.createCounter('scaler.reservations.lost', {
      description:
        'Pool rows of running agents found gone (removed while the lease had lapsed, or by an operator).',
      unit: '{reservation}',
    });
    const agents = meter.createObservableUpDownCounter('scaler.agents', {
      description: 'Agents tracked, by scaler and state.',
      unit: '{agent}',
    });
    agents.addCallback((result) => this.#observeAgents(result));
    const limits = meter.createObservableGauge('scaler.agents.limit', {
      description: 'Agent limits: the orchestrator-wide globalMaxAgents and each scaler maxAgents.',
      unit: '{agent}',
    });
    limits.addCallback((result) => this.#observeLimits(result));
    const resource = (name: string, unit: string, description: string, pick: Pick) => {
      const gauge = meter.createObservableGauge(name, { description, unit });
      gauge.addCallback((result) => this.#observeScopes(result, pick));
    };
    resource(
      'scaler.cpu.reserved',
      '{cpu}',
      'CPU requests held by this manager, per scope (orchestrator, scaler, pool).',
      {
        usage: (u) => u.cpus,
      },
    );
    resource(
      'scaler.memory.reserved',
      'By',
      'Memory requests held by this manager, per scope (orchestrator, scaler, pool).',
      {
        usage: (u) => u.memBytes,
      },
    );
    resource('scaler.cpu.cap', '{cpu}', 'CPU caps per scope (absent where uncapped).', {
      cap: (c) => c.maxCpu,
    });
    resource('scaler.memory.cap', 'By', 'Memory caps per scope (absent where uncapped).', {
      cap: (c) => c.maxMemoryBytes,
    });
    const failures = meter.createObservableGauge('scaler.backoff.failures', {
      description: 'Consecutive spawn failures counted toward the backoff, per scaler.',
      unit: '{failure}',
    });
    const open = meter.createObservableGauge('scaler.backoff.open', {
      description: 'Whether the scaler is backing off now (1) or not (0).',
      unit: '1',
    });
    failures.addCallback((result) => {
      for (const b of this.#view().status().backends) {
        result.observe(b.backoff?.failures ?? 0, { 'scaler.name': b.name });
      }
    });
    open.addCallback((result) => {
      for (const b of this.#view().status().backends) {
        result.observe(b.backoff?.open ? 1 : 0, { 'scaler.name': b.name });
      }
    });
  }

  #observeAgents(result: OtelObservableResult): void {
    for (const b of this.#view().status().backends) {
      const counts: Array<[string, number]> = [
        ['spawning', b.spawningCount],
        ['idle', b.idleCount],
        ['busy', b.busyCount],
        ['draining', b.drainingCount],
        ['destroying', b.destroyingCount],
      ];
      for (const [state, n] of counts) {
        result.observe(n, { 'scaler.name': b.name, 'scaler.agent.state': state });
      }
    }
  }

  #observeLimits(result: OtelObservableResult): void {
    const status = this.#view().status();
    result.observe(status.globalMaxAgents, { 'scaler.scope': 'orchestrator' });
    for (const b of status.backends) {
      result.observe(b.maxAgents, { 'scaler.scope': 'scaler', 'scaler.name': b.name });
    }
  }

  #observeScopes(result: OtelObservableResult, pick: Pick): void {
    const status = this.#view().status();
    const report = (usage: Usage, cap: ResourceCap | undefined, attributes: OtelAttributes) => {
      const value = pick.usage ? pick.usage(usage) : cap && pick.cap!(cap);
      if (value !== undefined) result.observe(value, attributes);
    };
    report(status.globalUsage, status.globalResourceCap, { 'scaler.scope': 'orchestrator' });
    for (const b of status.backends) {
      report(b.usage, b.resourceCap, { 'scaler.scope': 'scaler', 'scaler.name': b.name });
    }
    for (const p of status.pools) {
      report(p.usage, p.cap, { 'scaler.scope': 'pool', 'scaler.pool': p.name });
    }
  }

  /** Wrap the host's `onEvent` so the telemetry sees every event first. */
  wrapOnEvent(onEvent: ((event: ScalerEvent) => void) | undefined): (event: ScalerEvent) => void {
    return (event) => {
      try {
        this.#event(event);
      } catch {
        // Telemetry never breaks the manager's books.
      }
      onEvent?.(event);
    };
  }

  #event(event: ScalerEvent): void {
    switch (event.kind) {
      case 'registered': {
        const record = this.#view().core.book.get(event.agentId);
        if (record === undefined || this.#registration === undefined) return;
        this.#registration.record(Math.max(0, event.at - record.spawnedAt) / 1000, {
          'scaler.name': event.scaler,
          'scaler.warm': record.warm,
        });
        return;
      }
      case 'destroyed': {
        const reason = event.data?.reason;
        this.#destroyed?.add(1, {
          'scaler.name': event.scaler,
          'scaler.reason': typeof reason === 'string' ? reason : 'unknown',
        });
        return;
      }
      case 'reservation-lost': {
        const pool = event.data?.pool;
        this.#lost?.add(1, { 'scaler.name': event.scaler, 'scaler.pool': String(pool) });
        return;
      }
      default:
    }
  }

  /** One `requestScale`: its span (the parent of the reserve and spawn spans) and its answer counted. */
  async scale(jobId: string, run: () => Promise<ScaleResult>): Promise<ScaleResult> {
    const span = this.#tracer?.startSpan('scaler.request_scale', {
      kind: 0,
      attributes: { 'scaler.job.id': jobId },
    });
    // A second request for a job in flight answers already-spawning: the first span stays the parent.
    const owns = span !== undefined && !this.#scaleSpans.has(jobId);
    if (owns) this.#scaleSpans.set(jobId, span);
    let result: ScaleResult;
    try {
      result = await run();
    } catch (error) {
      if (owns && this.#scaleSpans.get(jobId) === span) this.#scaleSpans.delete(jobId);
      this.#requests?.add('error', errorAttributes);
      if (span) {
        failSpan(span, error);
        span.end();
      }
      throw error;
    }
    if (owns && this.#scaleSpans.get(jobId) === span) this.#scaleSpans.delete(jobId);
    this.#answered(jobId, result, span);
    return result;
  }

  #answered(jobId: string, result: ScaleResult, span: OtelSpan | undefined): void {
    const backend = 'backend' in result ? result.backend : undefined;
    const limit =
      'limit' in result
        ? result.limit
        : result.kind === 'backing-off'
          ? { limit: 'backing-off' as const }
          : undefined;
    const pool = limit !== undefined && 'pool' in limit ? limit.pool : undefined;
    const dimension =
      limit !== undefined && 'dimension' in limit && limit.dimension !== undefined
        ? String(limit.dimension)
        : undefined;
    const describe = () =>
      attributes({
        'scaler.result': result.kind,
        'scaler.name': backend,
        'scaler.limit': limit?.limit,
        'scaler.pool': pool,
        'scaler.limit.dimension': dimension,
      });
    this.#requests?.add(
      `${result.kind}\u0000${backend}\u0000${limit?.limit}\u0000${pool}\u0000${dimension}`,
      describe,
    );
    const now = this.#view().core.now();
    if (result.kind === 'at-capacity' || result.kind === 'backing-off') {
      if (this.#jobWait !== undefined && !this.#waiting.has(jobId)) {
        if (this.#waiting.size >= MAX_WAITING_JOBS) {
          this.#waiting.delete(this.#waiting.keys().next().value!);
        }
        this.#waiting.set(jobId, now);
      }
    } else if (result.kind === 'spawned') {
      // Only jobs that were refused first: a job spawned at its first request did not wait.
      const since = this.#waiting.get(jobId);
      if (since !== undefined) {
        this.#waiting.delete(jobId);
        this.#jobWait?.record(
          Math.max(0, now - since) / 1000,
          this.#attributes.get(`wait\u0000${result.backend}`, () => ({
            'scaler.name': result.backend,
          })),
        );
      }
    } else if (result.kind !== 'already-spawning') {
      this.#waiting.delete(jobId);
    }
    if (span === undefined) return;
    for (const [key, value] of Object.entries(describe())) {
      if (value !== undefined) span.setAttribute(key, value);
    }
    if (result.kind === 'spawned' || result.kind === 'spawn-failed') {
      span.setAttribute('scaler.agent.id', result.agentId);
    }
    if (result.kind === 'spawn-failed') {
      span.setAttribute('scaler.stage', result.stage);
      failSpan(span, result.error);
    }
    span.end();
  }

  #child(name: string, record: AgentRecord, attributes: OtelAttributes): OtelSpan | undefined {
    if (this.#tracer === undefined) return undefined;
    const parent = record.jobId === undefined ? undefined : this.#scaleSpans.get(record.jobId);
    return this.#tracer.startSpan(
      name,
      {
        kind: 0,
        attributes: {
          'scaler.name': record.scaler.name,
          'scaler.agent.id': record.agentId,
          'scaler.warm': record.warm,
          ...attributes,
        },
      },
      parent === undefined ? undefined : contextWithSpan(parent),
    );
  }

  /** The pool reservation of a spawn: its span, handed to the ledger as the parent of its own. */
  reserve(record: AgentRecord, run: () => Promise<ReserveResult>): Promise<ReserveResult> {
    const pool = record.pool!;
    const span = this.#child('scaler.pool.reserve', record, { 'scaler.pool': pool });
    let call: Promise<ReserveResult>;
    if (span === undefined) {
      call = run();
    } else {
      offerParentSpan(pool, record.agentId, span);
      try {
        call = run();
      } finally {
        withdrawParentSpan(pool, record.agentId);
      }
    }
    return call.then(
      (granted) => {
        if (!granted.ok) {
          span?.setAttribute('scaler.result', 'refused');
          span?.setAttribute('scaler.limit.dimension', granted.dimension);
        } else span?.setAttribute('scaler.result', 'granted');
        span?.end();
        return granted;
      },
      (error: unknown) => {
        this.#spawns?.add(`${record.scaler.name}\u0000${record.warm}\u0000reserve`, () => ({
          'scaler.name': record.scaler.name,
          'scaler.warm': record.warm,
          'scaler.outcome': 'failed',
          'scaler.stage': 'reserve',
        }));
        if (span) {
          failSpan(span, error);
          span.end();
        }
        throw error;
      },
    );
  }

  /** The backend's spawn call: its span, its duration and outcome. */
  async spawn<T>(record: AgentRecord, run: () => T): Promise<Awaited<T>> {
    const core = this.#view().core;
    const span = this.#child('scaler.backend.spawn', record, {});
    const started = core.now();
    let result: Awaited<T>;
    try {
      result = await run();
    } catch (error) {
      this.#spawned(record, 'failed', started, core.now());
      if (span) {
        failSpan(span, error);
        span.end();
      }
      throw error;
    }
    this.#spawned(record, 'spawned', started, core.now());
    span?.end();
    return result;
  }

  #spawned(record: AgentRecord, how: 'spawned' | 'failed', started: number, now: number): void {
    const name = record.scaler.name;
    const warm = record.warm;
    const key = `${name}\u0000${warm}\u0000${how}`;
    let attributes = this.#spawnAttributes.get(key);
    if (attributes === undefined) {
      attributes = { 'scaler.name': name, 'scaler.warm': warm, 'scaler.outcome': how };
      if (how === 'failed') attributes['scaler.stage'] = 'spawn';
      if (this.#spawnAttributes.size < 10_000) this.#spawnAttributes.set(key, attributes);
    }
    const fixed = attributes;
    this.#spawnDuration?.record((now - started) / 1000, fixed);
    this.#spawns?.add(key, () => fixed);
  }
}

const errorAttributes = (): OtelAttributes => ({ 'scaler.result': 'error' });

interface Pick {
  usage?: (usage: Usage) => number;
  cap?: (cap: ResourceCap) => number | undefined;
}
