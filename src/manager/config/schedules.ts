import { Cron } from 'croner';

/** The parts of a warm pool's config the schedules read (its `size` and `schedules`). */
interface WarmPoolConfig {
  size: number;
  schedules: readonly WarmPoolSchedule[];
}

interface WarmPoolSchedule {
  cron: string;
  timezone: string;
  size: number;
}

const MINUTE_MS = 60_000;
/** How far a run's start or end is searched (a pattern that matches longer is "always"). */
const HORIZON_MINUTES = 8 * 24 * 60;

/** What the schedules say at one instant. @internal */
export interface ScheduleAnswer {
  /** The warm pool size now. */
  size: number;
  /** Index of the winning schedule, when one is active. */
  active?: number;
  /** Epoch ms of the next minute at which any schedule starts or ends. */
  nextChangeAt?: number;
}

interface Compiled {
  crons: Cron[];
  cached: { from: number; until: number; answer: ScheduleAnswer } | undefined;
}

/**
 * Warm-pool schedules. A schedule is a period: it is active during every
 * minute its cron pattern matches, in its time zone (GitLab autoscaler
 * `periods`), e.g. `* 8-17 * * mon-fri` is working hours. When several are
 * active, the one whose current run started latest wins; outside all of them
 * the warm pool's `size` applies. Answers are cached until the next change.
 * @internal
 */
export class Schedules {
  readonly #compiled = new WeakMap<WarmPoolConfig, Compiled>();

  /** The warm pool size at `now`, the winning schedule, and when that changes. */
  evaluate(warm: WarmPoolConfig, now: number): ScheduleAnswer {
    if (warm.schedules.length === 0) return { size: warm.size };
    let compiled = this.#compiled.get(warm);
    if (compiled === undefined) {
      compiled = { crons: warm.schedules.map(compile), cached: undefined };
      this.#compiled.set(warm, compiled);
    }
    const cached = compiled.cached;
    if (cached !== undefined && now >= cached.from && now < cached.until) return cached.answer;
    const minute = Math.floor(now / MINUTE_MS) * MINUTE_MS;
    let winner: number | undefined;
    let winnerStart = Number.NEGATIVE_INFINITY;
    let next = Number.POSITIVE_INFINITY;
    for (const [i, cron] of compiled.crons.entries()) {
      if (cron.match(new Date(minute))) {
        const start = walk(cron, minute, -1, true);
        if (start >= winnerStart) {
          winner = i;
          winnerStart = start;
        }
        next = Math.min(next, walk(cron, minute, 1, true) + MINUTE_MS);
      } else {
        const starts = cron.nextRun(new Date(minute));
        if (starts !== null) next = Math.min(next, starts.getTime());
      }
    }
    const answer: ScheduleAnswer = {
      size: winner === undefined ? warm.size : warm.schedules[winner]!.size,
    };
    if (winner !== undefined) answer.active = winner;
    if (Number.isFinite(next)) answer.nextChangeAt = next;
    compiled.cached = {
      from: minute,
      until: Math.min(next, minute + HORIZON_MINUTES * MINUTE_MS),
      answer,
    };
    return answer;
  }
}

function compile(schedule: WarmPoolSchedule): Cron {
  return new Cron(schedule.cron, { timezone: schedule.timezone });
}

/**
 * From a matching `minute`, step by `direction` minutes while the pattern
 * keeps matching; the last matching minute (bounded by the horizon).
 */
function walk(cron: Cron, minute: number, direction: 1 | -1, matching: boolean): number {
  let at = minute;
  for (let i = 0; i < HORIZON_MINUTES; i++) {
    const step = at + direction * MINUTE_MS;
    if (cron.match(new Date(step)) !== matching) return at;
    at = step;
  }
  return at;
}

/**
 * Check one schedule: a five-field pattern (minute precision) croner accepts,
 * and a time zone the runtime knows. Returns the problem, if any.
 * @internal
 */
export function scheduleProblem(schedule: { cron: string; timezone: string }): string | undefined {
  if (schedule.cron.trim().split(/\s+/).length !== 5) {
    return `Expected a five-field cron pattern (minute hour day-of-month month day-of-week), got "${schedule.cron.slice(0, 100)}"`;
  }
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: schedule.timezone });
  } catch {
    return `Unknown time zone "${schedule.timezone.slice(0, 100)}"; expected an IANA name such as "Europe/Berlin" or "UTC"`;
  }
  try {
    new Cron(schedule.cron, { timezone: schedule.timezone }).nextRun(new Date(0));
  } catch (error) {
    return `Invalid cron pattern "${schedule.cron.slice(0, 100)}": ${(error as Error).message}`;
  }
  return undefined;
}
