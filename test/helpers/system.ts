import { execFileSync } from 'node:child_process';

/**
 * What a system test may need from the machine. Under
 * SCALER_PRIMITIVES_REQUIRE_SYSTEM=1 (set by CI) a missing one fails the run;
 * otherwise the suite is skipped with one line saying what and why.
 */
export type SystemNeed = 'nft' | 'nats-server' | 'ip' | 'root';

// The Debian package that provides each command.
const PACKAGE: Record<Exclude<SystemNeed, 'root'>, string> = {
  nft: 'nftables',
  'nats-server': 'nats-server',
  ip: 'iproute2',
};

const required = process.env.SCALER_PRIMITIVES_REQUIRE_SYSTEM === '1';

function onPath(binary: string): boolean {
  try {
    execFileSync('sh', ['-c', `command -v ${binary}`], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

function present(need: SystemNeed): boolean {
  switch (need) {
    case 'root':
      return typeof process.getuid === 'function' && process.getuid() === 0;
    default:
      return onPath(need);
  }
}

/**
 * Returns true when every need is met. When one is missing: throws under
 * SCALER_PRIMITIVES_REQUIRE_SYSTEM=1, else prints one line and returns false.
 * Use as `describe.runIf(hasSystem('nft', 'ip', 'root')('nftables rules'))(...)`.
 *
 * @example
 * const ok = hasSystem(['nft', 'ip', 'root'], 'nftables system tests');
 * describe.runIf(ok)('nftables system tests', () => { ... });
 */
export function hasSystem(needs: SystemNeed[], suite: string): boolean {
  const missing = needs.filter((need) => !present(need));
  if (missing.length === 0) return true;
  const line = `${suite}: needs ${missing.join(', ')} (${missing
    .map((m) =>
      m === 'root' ? 'run as root' : `install ${PACKAGE[m]}, e.g. apt-get install ${PACKAGE[m]}`,
    )
    .join('; ')})`;
  if (required) {
    throw new Error(`SCALER_PRIMITIVES_REQUIRE_SYSTEM=1 but ${line}`);
  }
  console.warn(`skipped: ${line}`);
  return false;
}
