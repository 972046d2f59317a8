/**
 * Strict zod objects whose unknown-key error names the key, the nearest accepted key
 * and every accepted one, as the library's other strict-key checks do
 * (`Unknown key "maxAgnts" (did you mean "maxAgents"?); accepted keys: ...`), instead
 * of zod's bare `Unrecognized key`. Internal: not part of the public surface.
 */
import { z } from 'zod';
import { nearest, showValue } from './strict-keys.js';

/** The message for `keys` found where only `accepted` are read. */
export function unknownKeysMessage(keys: readonly string[], accepted: readonly string[]): string {
  const shown = keys.slice(0, 5).map(showValue).join(', ');
  const more = keys.length > 5 ? ` and ${keys.length - 5} more` : '';
  let hint = '';
  for (const key of keys.slice(0, 5)) {
    const near = nearest(key, accepted);
    if (near === undefined) continue;
    const which = keys.length === 1 ? '' : ` for ${showValue(key)}`;
    hint = ` (did you mean ${JSON.stringify(near)}${which}?)`;
    break;
  }
  return `Unknown key${keys.length === 1 ? '' : 's'} ${shown}${more}${hint}; accepted keys: ${accepted.join(', ')}`;
}

/**
 * `z.strictObject(shape)` with the library's unknown-key message; every other issue
 * keeps zod's message.
 */
export function strictShape<Shape extends z.core.$ZodLooseShape>(shape: Shape) {
  const accepted = Object.keys(shape);
  return z.strictObject(shape, {
    error: (issue) =>
      issue.code === 'unrecognized_keys' ? unknownKeysMessage(issue.keys, accepted) : undefined,
  });
}
