// readAgentCaps against a scripted connection: the replies a real server sends
// for cases a local nats-server 2.9 cannot produce (server-written markers,
// unexpected statuses), and the errors nats.js raises.
import {
  headers,
  type Msg,
  type NatsConnection,
  NoRespondersError,
  RequestError,
  TimeoutError,
} from '@nats-io/transport-node';
import { readAgentCaps } from 'scaler-primitives/agent-caps/nats';
import { describe, expect, it } from 'vitest';
import { isCapsValueError } from '../../src/errors/agent-caps.js';
import { isNatsRequestError } from '../../src/errors/nats.js';

function scripted(reply: () => Partial<Msg> | Error) {
  const requests: Array<{ subject: string; timeout: number | undefined }> = [];
  const nc = {
    request: async (subject: string, _data: Uint8Array, opts?: { timeout?: number }) => {
      requests.push({ subject, timeout: opts?.timeout });
      const r = reply();
      if (r instanceof Error) throw r;
      return r as Msg;
    },
  } as unknown as NatsConnection;
  return { nc, requests };
}

function message(data: string, entries: Record<string, string> = {}, code = 0, description = '') {
  const h = code ? headers(code, description) : headers();
  for (const [k, v] of Object.entries(entries)) h.set(k, v);
  return { data: new TextEncoder().encode(data), headers: h };
}

describe('readAgentCaps', () => {
  it('sends one direct get for the key subject with the timeout', async () => {
    const { nc, requests } = scripted(() =>
      message('{"cpu_quota":"400%"}', { 'Nats-Sequence': '42' }),
    );
    expect(await readAgentCaps(nc, 'iris', { timeout: 750 })).toEqual({
      kind: 'current',
      caps: { cpuQuota: '400%' },
      revision: 42,
    });
    expect(requests).toEqual([
      { subject: '$JS.API.DIRECT.GET.KV_agent-limits.$KV.agent-limits.iris', timeout: 750 },
    ]);
  });

  it.each([
    ['a delete marker', { 'KV-Operation': 'DEL' }],
    ['a purge marker', { 'KV-Operation': 'PURGE' }],
    ['a server marker (MaxAge)', { 'Nats-Marker-Reason': 'MaxAge' }],
    ['a server marker (Remove)', { 'Nats-Marker-Reason': 'Remove' }],
  ])('reads %s as all unset', async (_, entries) => {
    const { nc } = scripted(() => message('', { ...entries, 'Nats-Sequence': '7' }));
    expect(await readAgentCaps(nc, 'iris')).toEqual({ kind: 'current', caps: {}, revision: 7 });
  });

  it('reads 404 as all unset', async () => {
    const { nc } = scripted(() => message('', {}, 404, 'Message Not Found'));
    expect(await readAgentCaps(nc, 'iris')).toEqual({ kind: 'current', caps: {}, revision: 0 });
  });

  it('raises another status as a typed error naming it', async () => {
    const { nc } = scripted(() => message('', {}, 408, 'Request Timeout'));
    await expect(readAgentCaps(nc, 'iris')).rejects.toSatisfy(
      (e) =>
        isNatsRequestError(e) &&
        e.code === 'ERR_NATS_REQUEST' &&
        e.message.includes('status 408 Request Timeout'),
    );
  });

  it('reads no responders as no bucket', async () => {
    const { nc } = scripted(
      () => new RequestError('no responders', { cause: new NoRespondersError('x') }),
    );
    expect(await readAgentCaps(nc, 'iris')).toEqual({ kind: 'no-bucket' });
  });

  it('explains what a timeout may mean', async () => {
    const { nc } = scripted(() => new TimeoutError());
    await expect(readAgentCaps(nc, 'iris')).rejects.toSatisfy(
      (e) =>
        isNatsRequestError(e) &&
        e.code === 'ERR_NATS_TIMEOUT' &&
        /refuses for permissions/.test(e.message) &&
        /before 2\.10\.26/.test(e.message) &&
        /allow_direct/.test(e.message),
    );
  });

  it('refuses an invalid stored value', async () => {
    const { nc } = scripted(() => message('{"cpu_quota":"2"}'));
    await expect(readAgentCaps(nc, 'iris')).rejects.toSatisfy(isCapsValueError);
  });

  it('checks the agent name before sending anything', async () => {
    const { nc, requests } = scripted(() => message('{}'));
    await expect(readAgentCaps(nc, 'a.*')).rejects.toThrow(/Invalid agent name "a\.\*"/);
    expect(requests).toEqual([]);
  });
});
