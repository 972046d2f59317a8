import { describe, expect, it } from 'vitest';
import { liveAgentView } from '../../src/internal/live-ids.js';

describe('liveAgentView (the live set of a sweep)', () => {
  it('reads a live view again on every call, so an agent started meanwhile counts', () => {
    const alive = new Set(['a']);
    const liveNow = liveAgentView(alive);
    alive.add('b');
    expect([...liveNow()].sort()).toEqual(['a', 'b']);
    alive.delete('a');
    expect([...liveNow()]).toEqual(['b']);
  });

  it('reads a one-shot iterator once, up front, and answers from that copy', () => {
    function* ids() {
      yield 'a';
      yield 'b';
    }
    const liveNow = liveAgentView(ids());
    expect([...liveNow()].sort()).toEqual(['a', 'b']);
    expect([...liveNow()].sort()).toEqual(['a', 'b']);
  });

  it('refuses what is not an iterable of strings before anything is read', () => {
    for (const bad of [undefined, null, 'agent-1', 42, { size: 1 }]) {
      expect(() => liveAgentView(bad as never)).toThrow(
        new TypeError('Expected `liveAgentIds` to be an iterable of agent ids'),
      );
    }
    expect(() => liveAgentView(['a', 7] as never)).toThrow(
      new TypeError('Expected every live agent id to be a string, got `number`'),
    );
  });
});
