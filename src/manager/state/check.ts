import { InvalidInputError } from '../../errors/index.js';
import { agentStateRecordSchema } from './schema.js';
import type { StateChange } from './types.js';

/** The most changes one commit may carry. */
export const MAX_CHANGES_PER_COMMIT = 65_536;

/**
 * Check a commit's changes before anything is written: an array of at most
 * {@link MAX_CHANGES_PER_COMMIT} `{ op: 'put', record }` (a valid record) or
 * `{ op: 'delete', agentId }`, at most one per agent.
 *
 * @throws TypeError for a malformed change; InvalidInputError for an invalid record.
 * @internal
 */
export function checkChanges(changes: readonly StateChange[]): void {
  if (!Array.isArray(changes)) {
    throw new TypeError(`Expected \`changes\` to be an array, got \`${typeof changes}\``);
  }
  if (changes.length > MAX_CHANGES_PER_COMMIT) {
    throw new TypeError(
      `Expected at most ${MAX_CHANGES_PER_COMMIT} changes in one commit, got ${changes.length}`,
    );
  }
  const seen = new Set<string>();
  for (const change of changes) {
    let agentId: string;
    if (change?.op === 'put' && Object.keys(change).length === 2) {
      const parsed = agentStateRecordSchema.safeParse(change.record);
      if (!parsed.success) {
        const issue = parsed.error.issues[0]!;
        throw new InvalidInputError(
          'record',
          String((change.record as { agentId?: unknown })?.agentId ?? '').slice(0, 64),
          `Expected a valid agent state record, got one where ${issue.path.join('.') || '(root)'}: ${issue.message}`,
        );
      }
      agentId = change.record.agentId;
    } else if (
      change?.op === 'delete' &&
      Object.keys(change).length === 2 &&
      typeof change.agentId === 'string' &&
      change.agentId !== '' &&
      change.agentId.length <= 253
    ) {
      agentId = change.agentId;
    } else {
      throw new TypeError(
        `Expected each change to be { op: 'put', record } or { op: 'delete', agentId }, got \`${JSON.stringify(change)?.slice(0, 120)}\``,
      );
    }
    if (seen.has(agentId)) {
      throw new TypeError(
        `Expected at most one change per agent in a commit, got two for \`${agentId.slice(0, 64)}\``,
      );
    }
    seen.add(agentId);
  }
}
