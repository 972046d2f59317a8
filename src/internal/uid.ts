/**
 * This process's effective uid: the owner every file and directory the
 * library trusts must have. Read at each check, not cached, so a program that
 * drops privileges (`process.seteuid`) is judged by its uid of the moment.
 *
 * @returns The effective uid, or `undefined` where there is none (Windows).
 */
export function effectiveUid(): number | undefined {
  if (typeof process.geteuid === 'function') return process.geteuid();
  return typeof process.getuid === 'function' ? process.getuid() : undefined;
}
