/**
 * The live set of a sweep (nftables rules, caps keys): which agents are alive, read
 * after the sweep has listed what exists, so that an agent started meanwhile (in a live
 * view such as the one `ScalerManager.reconcile` passes) keeps what it owns.
 */

/**
 * Check `liveAgentIds` now (an iterable of strings) and return a reader of the live set:
 * each call iterates `liveAgentIds` again, except for a one-shot iterator (an iterator
 * that is its own iterable), which is read once, here, and answered from that copy.
 *
 * @throws TypeError when `liveAgentIds` is not an iterable, or yields a non-string.
 */
export function liveAgentView(liveAgentIds: Iterable<string>): () => Set<string> {
  if (
    typeof liveAgentIds !== 'object' ||
    liveAgentIds === null ||
    typeof (liveAgentIds as { [Symbol.iterator]?: unknown })[Symbol.iterator] !== 'function'
  ) {
    throw new TypeError('Expected `liveAgentIds` to be an iterable of agent ids');
  }
  const first = liveSet(liveAgentIds);
  const oneShot = (liveAgentIds[Symbol.iterator]() as unknown) === liveAgentIds;
  return () => (oneShot ? first : liveSet(liveAgentIds));
}

function liveSet(liveAgentIds: Iterable<string>): Set<string> {
  const live = new Set<string>();
  for (const id of liveAgentIds) {
    if (typeof id !== 'string') {
      throw new TypeError(`Expected every live agent id to be a string, got \`${typeof id}\``);
    }
    live.add(id);
  }
  return live;
}
