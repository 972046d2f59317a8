/**
 * The two `/proc` readings the ledger (its leases and rows) and the process
 * backend (its agents) both judge processes by: `/proc/<pid>/stat` and the boot
 * id. Each caller reads the files its own way (the ledger through its fs seam);
 * the parsing is written here once.
 */

/** The fields of `/proc/<pid>/stat` the library uses. */
export interface ProcStat {
  /** Field 3: the state letter (`R`, `S`, `Z`, `X`...). */
  state: string;
  /** Field 5: the process group id. */
  pgrp: number;
  /** Field 22: the start time, in clock ticks since boot. */
  startTime: number;
}

/** Parse the text of `/proc/<pid>/stat`; `undefined` when it is not one. */
export function parseProcStat(text: string): ProcStat | undefined {
  // Field 2 (comm) is in parentheses and may hold spaces or ')': split after the last ')'.
  const rest = text.slice(text.lastIndexOf(')') + 2).split(' ');
  // rest[0] is field 3 (state), rest[2] field 5 (pgrp), rest[19] field 22 (starttime).
  const startTime = Number(rest[19]);
  const pgrp = Number(rest[2]);
  if (!Number.isSafeInteger(startTime) || startTime < 0 || !Number.isSafeInteger(pgrp)) {
    return undefined;
  }
  return { state: rest[0] ?? '?', pgrp, startTime };
}

/** The boot id `read` returns (the text of `/proc/sys/kernel/random/boot_id`); `unknown-boot` where there is none. */
export function bootIdFrom(read: () => string): string {
  try {
    return read().trim() || 'unknown-boot';
  } catch {
    return 'unknown-boot';
  }
}
