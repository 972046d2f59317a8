/**
 * The manager's observable instruments: agents by state, agent limits, CPU and
 * memory reserved and capped per scope, backoff state. All are read from the
 * manager's status when the SDK collects, so they cost nothing per operation.
 */
import type {
  OtelAttributes,
  OtelMeter,
  OtelObservableResult,
} from '../../internal/telemetry/index.js';
import type { ResourceCap } from '../../resources/types.js';
import type { AgentRecord } from '../agents/agents.js';
import type { ScalerStatus, Usage } from '../types.js';

/** What the telemetry reads from the manager. @internal */
export interface ManagerView {
  /** The parts of the manager's shared state the telemetry reads. */
  core: { readonly book: { get(agentId: string): AgentRecord | undefined }; now(): number };
  status(): ScalerStatus;
}

interface Pick {
  usage?: (usage: Usage) => number;
  cap?: (cap: ResourceCap) => number | undefined;
}

/**
 * Register the manager's observable instruments on `meter`; `view` is called
 * at each collection.
 * @internal
 */
export function observeManager(meter: OtelMeter, view: () => ManagerView): void {
  const agents = meter.createObservableUpDownCounter('scaler.agents', {
    description: 'Agents tracked, by scaler and state.',
    unit: '{agent}',
  });
  agents.addCallback((result) => observeAgents(result, view));
  const limits = meter.createObservableGauge('scaler.agents.limit', {
    description: 'Agent limits: the orchestrator-wide globalMaxAgents and each scaler maxAgents.',
    unit: '{agent}',
  });
  limits.addCallback((result) => observeLimits(result, view));
  const resource = (name: string, unit: string, description: string, pick: Pick) => {
    const gauge = meter.createObservableGauge(name, { description, unit });
    gauge.addCallback((result) => observeScopes(result, view, pick));
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
    for (const b of view().status().scalers) {
      result.observe(b.backoff?.failures ?? 0, { 'scaler.name': b.name });
    }
  });
  open.addCallback((result) => {
    for (const b of view().status().scalers) {
      result.observe(b.backoff?.open ? 1 : 0, { 'scaler.name': b.name });
    }
  });
}

function observeAgents(result: OtelObservableResult, view: () => ManagerView): void {
  for (const b of view().status().scalers) {
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

function observeLimits(result: OtelObservableResult, view: () => ManagerView): void {
  const status = view().status();
  result.observe(status.globalMaxAgents, { 'scaler.scope': 'orchestrator' });
  for (const b of status.scalers) {
    result.observe(b.maxAgents, { 'scaler.scope': 'scaler', 'scaler.name': b.name });
  }
}

function observeScopes(result: OtelObservableResult, view: () => ManagerView, pick: Pick): void {
  const status = view().status();
  const report = (usage: Usage, cap: ResourceCap | undefined, attributes: OtelAttributes) => {
    const value = pick.usage ? pick.usage(usage) : cap && pick.cap!(cap);
    if (value !== undefined) result.observe(value, attributes);
  };
  report(status.globalUsage, status.globalResourceCap, { 'scaler.scope': 'orchestrator' });
  for (const b of status.scalers) {
    report(b.usage, b.resourceCap, { 'scaler.scope': 'scaler', 'scaler.name': b.name });
  }
  for (const p of status.pools) {
    report(p.usage, p.cap, { 'scaler.scope': 'pool', 'scaler.pool': p.name });
  }
}
