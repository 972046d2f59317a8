/**
 * `scaler-primitives ledger top`: a live view of every pool of a ledger directory.
 * On a terminal the table is redrawn in place every interval; otherwise each
 * interval prints a time line and the table; `--json` prints one JSON object per
 * interval (one line each). Reads only: no lock, no write, nothing created.
 */
import { sleep, systemClock } from '../../clock.js';
import type { MachineLedger, PoolSnapshot } from '../../ledger/index.js';
import { formatCpu, formatMemory } from '../../resources/index.js';
import { escapeText } from '../escape.js';
import { type CliIO, table, UsageError } from '../registry.js';
import { type ExtendedUsage, extendedUsage, showExtended } from './ledger-extended.js';

/** The options of `ledger top`, parsed. @internal */
export interface TopOptions {
  /** Seconds between frames. */
  interval: number;
  /** Frames to show before exiting (undefined: until interrupted). */
  count: number | undefined;
  /** One JSON object per frame. */
  json: boolean;
}

const BAR = 20;

/**
 * Parse `--interval` (seconds, 0.1 to 3600, default 2) and `--count` (a whole number >= 1).
 *
 * @throws UsageError naming the flag and the accepted values.
 */
export function topOptions(values: {
  interval?: string;
  count?: string;
  json: boolean;
}): TopOptions {
  const interval = values.interval === undefined ? 2 : Number(values.interval);
  if (!Number.isFinite(interval) || interval < 0.1 || interval > 3600) {
    throw new UsageError(
      `--interval must be a number of seconds from 0.1 to 3600, got ${JSON.stringify(values.interval)}`,
    );
  }
  let count: number | undefined;
  if (values.count !== undefined) {
    count = Number(values.count);
    if (!Number.isInteger(count) || count < 1) {
      throw new UsageError(
        `--count must be a whole number >= 1, got ${JSON.stringify(values.count)}`,
      );
    }
  }
  return { interval, count, json: values.json };
}

interface PoolFrame {
  pool: string;
  rows: number;
  stale: number;
  cpu: { used: number; max?: number };
  memoryBytes: { used: number; max?: number };
  extended: Record<string, ExtendedUsage>;
  oldestReservedAt?: number;
  error?: string;
}

/** Show frames until `count` is reached (or forever). Resolves to the exit code. @internal */
export async function top(
  ledger: MachineLedger,
  dir: string,
  options: TopOptions,
  io: CliIO,
): Promise<number> {
  for (let frame = 1; ; frame++) {
    const pools = await ledger.pools();
    const frames = await Promise.all(pools.map((pool) => poolFrame(ledger, pool)));
    const at = systemClock.now();
    if (options.json) {
      io.out(`${JSON.stringify({ at: new Date(at).toISOString(), dir, pools: frames })}\n`);
    } else {
      const text = render(frames, dir, at, options.interval);
      if (io.isTTY && io.redraw) io.redraw(text);
      else io.out(`${text}\n`);
    }
    if (options.count !== undefined && frame >= options.count) return 0;
    await sleep(options.interval * 1000);
  }
}

async function poolFrame(ledger: MachineLedger, pool: string): Promise<PoolFrame> {
  let snapshot: PoolSnapshot;
  try {
    snapshot = await ledger.inspect(pool);
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    return {
      pool,
      rows: 0,
      stale: 0,
      cpu: { used: 0 },
      memoryBytes: { used: 0 },
      extended: {},
      error: typeof code === 'string' ? code : String(error).slice(0, 200),
    };
  }
  const out: PoolFrame = {
    pool,
    rows: snapshot.live.length,
    stale: snapshot.stale.length,
    cpu: { used: snapshot.usage.cpus },
    memoryBytes: { used: snapshot.usage.memBytes },
    extended: extendedUsage(snapshot),
  };
  if (snapshot.cap.maxCpu !== undefined) out.cpu.max = snapshot.cap.maxCpu;
  if (snapshot.cap.maxMemoryBytes !== undefined) out.memoryBytes.max = snapshot.cap.maxMemoryBytes;
  const times = snapshot.live.map((row) => row.reservedAt);
  if (times.length > 0) out.oldestReservedAt = Math.min(...times);
  return out;
}

function render(frames: PoolFrame[], dir: string, at: number, interval: number): string {
  const head = `ledger top  ${escapeText(dir)}  ${new Date(at).toISOString()}  every ${interval} s`;
  if (frames.length === 0) return `${head}\nNo pools\n`;
  const cells = frames.map((f) =>
    f.error !== undefined
      ? [f.pool, '-', '-', `error: ${f.error}`, '', '-', '']
      : [
          f.pool,
          String(f.rows),
          String(f.stale),
          bar(f.cpu.used, f.cpu.max, cpu),
          bar(f.memoryBytes.used, f.memoryBytes.max, memory),
          f.oldestReservedAt === undefined ? '-' : age(at - f.oldestReservedAt),
          showExtended(f.extended),
        ],
  );
  return `${head}\n${table(['POOL', 'ROWS', 'STALE', 'CPU', 'MEMORY', 'OLDEST', 'EXTENDED'], cells, [1, 2])}`;
}

/** `[#####...............] 2/8` (no bar without a cap). */
function bar(used: number, max: number | undefined, show: (n: number) => string): string {
  if (max === undefined) return `${show(used)} (no cap)`;
  const filled = max <= 0 ? BAR : Math.min(BAR, Math.round((used / max) * BAR));
  return `[${'#'.repeat(filled)}${'.'.repeat(BAR - filled)}] ${show(used)}/${show(max)}`;
}

function cpu(cores: number): string {
  try {
    return formatCpu(cores);
  } catch {
    return String(cores);
  }
}

function memory(bytes: number): string {
  try {
    return formatMemory(bytes);
  } catch {
    return String(bytes);
  }
}

function age(ms: number): string {
  const s = Math.max(0, Math.floor(ms / 1000));
  if (s < 120) return `${s}s`;
  if (s < 7200) return `${Math.floor(s / 60)}m`;
  return `${Math.floor(s / 3600)}h`;
}
