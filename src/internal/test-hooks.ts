/**
 * Test hooks reach a class through a symbol-keyed option that no subpath
 * exports: code under test/ imports this module from src/, a user of the
 * package cannot name the key, and the published types carry no trace of it.
 * Option validation looks at string keys only, so the key never trips it, and
 * a user who passes a `hooks` string key gets the usual unknown-key error.
 */

/** The option key under which tests pass hooks. */
export const TEST_HOOKS: unique symbol = Symbol('scaler-primitives.testHooks');

/**
 * A copy of `options` carrying `hooks` under {@link TEST_HOOKS}, typed as the
 * options themselves so it passes where the options go.
 */
export function withTestHooks<Options extends object, Hooks extends object>(
  options: Options,
  hooks: Hooks,
): Options {
  return { ...options, [TEST_HOOKS]: hooks };
}

/** The hooks `options` carries, or `{}`. */
export function testHooksOf<Hooks extends object>(options: object | undefined): Partial<Hooks> {
  const hooks = (options as { [TEST_HOOKS]?: Partial<Hooks> } | undefined)?.[TEST_HOOKS];
  return hooks ?? {};
}
