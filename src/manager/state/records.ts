import type { AgentRecord } from '../agents/agents.js';
import type { AgentStateRecord, StoredAgentState } from './types.js';

/**
 * The stored form of a tracked agent (a snapshot: later changes to `record`
 * do not reach it). `undefined` for a gone agent (it has no record).
 * @internal
 */
export function toStateRecord(record: AgentRecord): AgentStateRecord | undefined {
  if (record.state === 'gone') return undefined;
  const { requests, limits } = record.resources;
  const out: AgentStateRecord = {
    v: 1,
    agentId: record.agentId,
    scaler: record.scaler.name,
    state: record.state as StoredAgentState,
    warm: record.warm,
    labels: [...record.labels],
    resources: { requests: copy(requests), limits: copyLimits(limits) },
    poolHeld: record.poolHeld,
    spawnSettled: record.spawnSettled,
    spawnedAt: record.spawnedAt,
    registeredAt: record.registeredAt,
    idleSince: record.idleSince,
    jobsCompleted: record.jobsCompleted,
  };
  if (record.jobId !== undefined) out.jobId = record.jobId;
  if (record.jobId !== undefined && record.mailbox.runId !== undefined) {
    out.runId = record.mailbox.runId;
  }
  if (record.shares.length > 0) out.pool = record.shares[0]!.pool;
  if (record.shares.length > 1) out.pools = record.shares.map((share) => share.pool);
  if (record.devices !== undefined) {
    const devices: Record<string, string[]> = {};
    for (const [name, ids] of Object.entries(record.devices)) devices[name] = [...ids];
    out.devices = devices;
  }
  if (record.destroyReason !== undefined) out.destroyReason = record.destroyReason;
  const context = record.context === undefined ? undefined : jsonOnly(record.context);
  if (context !== undefined) out.context = context;
  return out;
}

function copy(
  amount: AgentRecord['resources']['requests'],
): AgentStateRecord['resources']['requests'] {
  const out: AgentStateRecord['resources']['requests'] = {
    cpus: amount.cpus,
    memBytes: amount.memBytes,
  };
  if (amount.extended !== undefined && Object.keys(amount.extended).length > 0) {
    out.extended = { ...amount.extended };
  }
  return out;
}

function copyLimits(
  limits: AgentRecord['resources']['limits'],
): AgentStateRecord['resources']['limits'] {
  const out: { cpus?: number; memBytes?: number; extended?: Record<string, number> } = {};
  if (limits.cpus !== undefined) out.cpus = limits.cpus;
  if (limits.memBytes !== undefined) out.memBytes = limits.memBytes;
  if (limits.extended !== undefined && Object.keys(limits.extended).length > 0) {
    out.extended = { ...limits.extended };
  }
  return out;
}

// A backend's context may hold anything; only what survives JSON is stored.
function jsonOnly(context: Record<string, unknown>): Record<string, unknown> | undefined {
  try {
    const text = JSON.stringify(context);
    return text === undefined ? undefined : (JSON.parse(text) as Record<string, unknown>);
  } catch {
    return undefined;
  }
}
