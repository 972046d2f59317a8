/**
 * The holder's side of cross-process combining (see `channel.ts`): merge its
 * own calls with the requests it claimed, in the order their batches started
 * (FIFO), and split the batch's answers back per sender (staged before the
 * pool file is written, posted after it: see `answers.ts`).
 */

import type { DocumentSource } from '../../document/codec.js';
import type { LedgerFs } from '../../fs.js';
import type { LedgerOp, OpAnswer } from '../../ops.js';
import type { LedgerDocument } from '../../types.js';
import { findLostRows, type LostRows } from '../lost.js';
import { encodeAnswer, notApplied, postNotApplied } from './answers.js';
import { type ClaimedRequest, usableRequest } from './channel.js';

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
      (_, i): OpAnswer =>
        i === part.lost?.index ? { ok: true, kind: 'placeholder', value: null } : answers[next++]!,
    ),
  );
}

/**
 * Each claimed waiter's answer text, by request id: its share of the batch's
 * answers, or "not applied" for a request that could not be planned.
 */
export function answerTexts(plan: CombinedPlan, split: readonly OpAnswer[][]): Map<string, string> {
  const texts = new Map<string, string>();
  plan.parts.forEach((part, i) => {
    if (!part.claimed) return;
    texts.set(part.claimed.id, encodeAnswer({ kind: 'answers', answers: split[i]! }, part.lost));
  });
  for (const claimed of plan.refused) texts.set(claimed.id, notApplied(claimed, false));
  return texts;
}

/**
 * The cycle failed: every claimed waiter does its calls itself (`wrote`: the
 * pool file was replaced, so they may have landed). Staged answers stay for
 * the waiters to read their releases from (it is swept once stale).
 */
export function failAnswers(
  fs: LedgerFs,
  dir: string,
  remote: readonly ClaimedRequest[],
  wrote: boolean,
): void {
  for (const claimed of remote) postNotApplied(fs, dir, claimed, wrote);
}
