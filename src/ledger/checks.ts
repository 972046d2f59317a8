/**
 * Argument checks shared by ledger backends: programmer misuse raises a plain
 * `TypeError` naming the argument, the accepted form and the value given.
 */

/** An optional timing option: `fallback` when undefined, else a finite number > 0. */
export function positiveOption(name: string, value: number | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0) {
    throw new TypeError(`Expected \`${name}\` to be a finite number > 0, got \`${String(value)}\``);
  }
  return value;
}

/** A CPU or memory amount (or an interval): a finite number >= 0. */
export function checkAmount(name: string, value: unknown): void {
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0) {
    throw new TypeError(
      `Expected \`${name}\` to be a finite number >= 0, got \`${String(value)}\``,
    );
  }
}

/** An agent id: a non-empty string. */
export function checkAgentId(agentId: unknown): void {
  if (typeof agentId !== 'string' || agentId === '') {
    throw new TypeError(
      `Expected \`agentId\` to be a non-empty string, got \`${String(agentId)}\``,
    );
  }
}

/**
 * The checks of `reserve` after the backend's own pool-name check, in the order
 * both ledgers make them: the pool is registered, then the agent id, then the amounts.
 */
export function checkReserve(
  registered: ReadonlyMap<string, unknown>,
  pool: string,
  agentId: unknown,
  cpus: unknown,
  memBytes: unknown,
): void {
  if (!registered.has(pool)) {
    throw new TypeError(
      `Pool ${JSON.stringify(pool)} is not registered; call registerPool(${JSON.stringify(pool)}, cap) first`,
    );
  }
  checkAgentId(agentId);
  checkAmount('cpus', cpus);
  checkAmount('memBytes', memBytes);
}
