/**
 * The strict shape of stored agent records and of the state document the
 * file and NATS stores write: unknown keys, wrong types, ids over their length
 * limit and unknown versions are refused, never repaired.
 */
import { z } from 'zod';
import { StateStoreError } from '../../errors/index.js';
import { StateStoreProblem } from '../../errors/state-store.js';
import { MAX_ID_LENGTH, MAX_LABEL_LENGTH, MAX_LABELS } from '../checks.js';
import { type AgentStateRecord, STATE_RECORD_VERSION } from './types.js';

const id = z.string().min(1).max(MAX_ID_LENGTH);
const time = z.number().finite().min(0);
const amount = z.strictObject({
  cpus: z.number().finite().min(0),
  memBytes: z.number().int().min(0),
  extended: z.record(z.string().min(1).max(MAX_LABEL_LENGTH), z.number().int().min(0)).optional(),
});
// A limit no layer declared is absent (unset), never 0.
const limits = z.strictObject({
  cpus: z.number().finite().gt(0).optional(),
  memBytes: z.number().int().gt(0).optional(),
  extended: z.record(z.string().min(1).max(MAX_LABEL_LENGTH), z.number().int().min(0)).optional(),
});

/** The zod schema of one {@link AgentStateRecord} (strict: unknown keys are errors). */
export const agentStateRecordSchema = z.strictObject({
  v: z.literal(STATE_RECORD_VERSION),
  agentId: id,
  scaler: id,
  state: z.enum(['spawning', 'idle', 'busy', 'draining', 'destroying']),
  warm: z.boolean(),
  jobId: id.optional(),
  runId: id.optional(),
  labels: z.array(z.string().min(1).max(MAX_LABEL_LENGTH)).max(MAX_LABELS * 4),
  resources: z.strictObject({ requests: amount, limits }),
  pool: id.optional(),
  pools: z.array(id).min(2).max(8).optional(),
  devices: z
    .record(z.string().min(1).max(MAX_LABEL_LENGTH), z.array(z.string().min(1).max(128)).max(256))
    .optional(),
  poolHeld: z.boolean(),
  spawnSettled: z.boolean(),
  spawnedAt: time,
  registeredAt: time,
  idleSince: time,
  jobsCompleted: z.number().int().min(0),
  destroyReason: z.string().min(1).max(64).optional(),
  context: z.record(z.string(), z.unknown()).optional(),
});

/** The document the file store writes: every record, and a revision that grows by one per write. */
export const stateDocumentSchema = z.strictObject({
  version: z.literal(STATE_RECORD_VERSION),
  revision: z.number().int().min(1),
  agents: z.array(agentStateRecordSchema),
});

/** What {@link stateDocumentSchema} accepts. */
export type StateDocument = z.infer<typeof stateDocumentSchema>;

/**
 * Parse stored text with `schema`, or throw a `StateStoreError` (`corrupt`)
 * naming `location` and the first problem. Nothing is repaired.
 */
export function parseStored<T>(schema: z.ZodType<T>, text: string, location: string): T {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (error) {
    throw corrupt(location, 'it is not JSON', error);
  }
  const parsed = schema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const where = issue.path.length > 0 ? issue.path.join('.') : '(root)';
    throw corrupt(location, `${where}: ${issue.message}`, parsed.error);
  }
  // Duplicate agent ids would make recovery ambiguous.
  const agents = (parsed.data as { agents?: AgentStateRecord[] }).agents;
  if (agents !== undefined) {
    const seen = new Set<string>();
    for (const record of agents) {
      if (seen.has(record.agentId)) {
        throw corrupt(location, `agent ${JSON.stringify(record.agentId)} appears twice`);
      }
      seen.add(record.agentId);
    }
  }
  return parsed.data;
}

function corrupt(location: string, problem: string, cause?: unknown): StateStoreError {
  return new StateStoreError(
    location,
    StateStoreProblem.CORRUPT,
    `Refusing the manager state in ${location}: ${problem}. It was left as it is; restore it from a backup, or move it away to start with no recovered agents (their pool rows are then reaped as stale).`,
    cause === undefined ? undefined : { cause },
  );
}
