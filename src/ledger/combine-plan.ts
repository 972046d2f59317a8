/**
 * The holder's side of cross-process combining (see `combine.ts`): merge its
 * own calls with the requests it claimed, in the order their batches started
 * (FIFO), split the batch's answers back per sender, and post them: staged
 * before the pool file is written, published after it.
 */
import {
  type ClaimedRequest,
  encodeAnswer,
  postNotApplied,
  publishAnswer,
  stageAnswer,
  usableRequest,
} from './combine.js';
import type { DocumentSource } from './document.js';
import type { LedgerFs } from './fs.js';
import type { OpAnswer } from './group-commit.js';
import { findLostRows, type LostRows } from './lost.js';
import type { LedgerOp } from './ops.js';
import type { LedgerDocument } from './types.js';

/** One sender's share of a combined cycle. */
export interface CombinedPart {
  /** When the sender's batch started: parts are applied in this order. */
  stamp: number;
  /** The sender's calls. */
  ops: LedgerOp[];
  /** The sender's lost-rows report (that call is not applied). */
  lost: LostRows | undefined;
  /** The request, for a waiter's part; `undefined` for the holder's own. */
  claimed?: ClaimedRequest;
  /** The sender wants the write fsynced. */
  fsync: boolean;
}

/** The merged batch of a combined cycle. */
export interface CombinedPlan {
  /** Every part, in start order. */
  parts: CombinedPart[];
  /** Claimed requests that cannot be applied here (they get "not applied"). */
  refused: ClaimedRequest[];
  /** The calls to apply, in order (lost-report calls left out). */
  ops: LedgerOp[];
}

/**
 * Merge the holder's calls with the claimed requests that can be applied to
 * `base` (decoded, same cap): all parts sorted by their batch's start time.
 * A request that started before the holder's batch goes before it.
 */
export function planCombined(
  own: { stamp: number; ops: LedgerOp[]; lost: LostRows | undefined; fsync: boolean },
  remote: readonly ClaimedRequest[],
  base: LedgerDocument,
  source: DocumentSource,
): CombinedPlan {
  const parts: CombinedPart[] = [own];
  const refused: ClaimedRequest[] = [];
  for (const claimed of remote) {
    const usable = usableRequest(claimed, base, source);
    if (!usable) {
      refused.push(claimed);
      continue;
    }
    const { envelope, request } = usable;
    const lost = findLostRows(
      base,
      new Set(envelope.held),
      envelope.instanceId,
      envelope.leaseId,
      request.ops,
    );
    parts.push({ stamp: envelope.stamp, ops: request.ops, lost, claimed, fsync: envelope.fsync });
  }
  parts.sort((a, b) => a.stamp - b.stamp);
  const ops = parts.flatMap((part) => part.ops.filter((_, i) => i !== part.lost?.index));
  return { parts, refused, ops };
}

/**
 * Split the answers of `plan.ops` back into one list per part, in part order.
 * A lost-report call's answer is a placeholder (`null`): the sender fills in
 * its own error.
 */
export function splitAnswers(plan: CombinedPlan, answers: readonly OpAnswer[]): OpAnswer[][] {
  let next = 0;
  return plan.parts.map((part) =>
    part.ops.map(
      (_, i): OpAnswer => (i === part.lost?.index ? { ok: true, value: null } : answers[next++]!),
    ),
  );
}

/**
 * Before the pool file is written: stage each waiter's answer as `<id>.pre`.
 * A waiter whose holder dies after this point learns from it which of its
 * releases the holder found a row for. Returns the ids staged.
 */
export function stageAnswers(
  fs: LedgerFs,
  dir: string,
  plan: CombinedPlan,
  split: readonly OpAnswer[][],
): Map<string, string> {
  const texts = new Map<string, string>();
  plan.parts.forEach((part, i) => {
    if (!part.claimed) return;
    const text = encodeAnswer({ kind: 'answers', answers: split[i]! }, part.lost);
    texts.set(part.claimed.id, stageAnswer(fs, dir, part.claimed.id, 'pre', text) ? '' : text);
  });
  return texts;
}

/**
 * After the pool file was written (and made durable): publish every staged
 * answer (`<id>.pre` becomes `<id>.ans`), and "not applied" for the refused.
 * An answer that could not be staged is written now.
 */
export function publishAnswers(
  fs: LedgerFs,
  dir: string,
  plan: CombinedPlan,
  staged: ReadonlyMap<string, string>,
): void {
  for (const [id, text] of staged) {
    if (text === '') publishAnswer(fs, dir, id, 'pre');
    else if (stageAnswer(fs, dir, id, 'dir', text)) publishAnswer(fs, dir, id, 'dir');
  }
  for (const claimed of plan.refused) postNotApplied(fs, dir, claimed, false);
}

/**
 * The cycle failed: every claimed waiter does its calls itself (`wrote`: the
 * pool file was replaced, so they may have landed). Staged answers stay for
 * the waiters to read their releases from.
 */
export function failAnswers(
  fs: LedgerFs,
  dir: string,
  remote: readonly ClaimedRequest[],
  wrote: boolean,
): void {
  for (const claimed of remote) postNotApplied(fs, dir, claimed, wrote);
}
