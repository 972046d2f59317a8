// The three tests of the Rust swarm-queue-client crate (module agent_limits),
// reproduced as golden vectors: our bytes and names must match the crate's.

import {
  BUCKET,
  decodeAgentCaps,
  directGetSubject,
  encodeAgentCaps,
  keySubject,
  STREAM,
} from 'scaler-primitives/agent-caps';
import { describe, expect, it } from 'vitest';
import { isEmpty } from '../../src/agent-caps/codec.js';

const text = (bytes: Uint8Array) => new TextDecoder().decode(bytes);

describe('golden vectors from swarm-queue-client agent_limits', () => {
  it('names_match_the_queue_grant', () => {
    expect(STREAM).toBe(`KV_${BUCKET}`);
    expect(BUCKET).toBe('agent-limits');
    expect(keySubject('iris')).toBe('$KV.agent-limits.iris');
    expect(directGetSubject('iris')).toBe(
      '$JS.API.DIRECT.GET.KV_agent-limits.$KV.agent-limits.iris',
    );
  });

  it('unset_fields_are_absent', () => {
    expect(text(encodeAgentCaps({ memoryMax: '8G' }))).toBe('{"memory_max":"8G"}');
    expect(Buffer.from(encodeAgentCaps({ memoryMax: '8G' }))).toEqual(
      Buffer.from('{"memory_max":"8G"}', 'utf8'),
    );
    const empty = decodeAgentCaps('{}');
    expect(empty).toEqual({});
    expect(isEmpty(empty)).toBe(true);
  });

  it('decoding_tolerates_unknown_fields', () => {
    const decoded = decodeAgentCaps(
      new TextEncoder().encode('{"cpu_quota":"400%","io_weight":"10"}'),
    );
    expect(decoded).toEqual({ cpuQuota: '400%' });
  });
});

describe('wire format details', () => {
  it('writes cpu_quota before memory_max whatever the object key order', () => {
    expect(text(encodeAgentCaps({ memoryMax: '8G', cpuQuota: '400%' }))).toBe(
      '{"cpu_quota":"400%","memory_max":"8G"}',
    );
  });

  it('encodes all unset as {} and never writes null', () => {
    expect(text(encodeAgentCaps({}))).toBe('{}');
    expect(text(encodeAgentCaps({ cpuQuota: undefined }))).toBe('{}');
    // biome-ignore lint/suspicious/noExplicitAny: a JS caller passing null
    expect(text(encodeAgentCaps({ cpuQuota: null as any, memoryMax: '1G' }))).toBe(
      '{"memory_max":"1G"}',
    );
  });

  it('reads null fields as unset, as serde does for Option<String>', () => {
    expect(decodeAgentCaps('{"cpu_quota":null,"memory_max":"8G"}')).toEqual({ memoryMax: '8G' });
  });

  it('decodes what it encodes', () => {
    const caps = { cpuQuota: '12.5%', memoryMax: 'infinity' };
    expect(decodeAgentCaps(encodeAgentCaps(caps))).toEqual(caps);
  });
});
