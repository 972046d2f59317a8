import type { ScalerBackend, SpawnRequest } from 'scaler-primitives/manager';
import {
  type ConformanceCheck,
  FakeBackend,
  scalerBackendConformance,
  TestClock,
} from 'scaler-primitives/testing';
import { describe, expect, it } from 'vitest';

const T0 = Date.parse('2026-01-05T09:00:00Z');

function request(agentId: string, jobId?: string): SpawnRequest {
  return {
    agentId,
    scaler: 'linux',
    ...(jobId === undefined ? {} : { jobId }),
    warm: jobId === undefined,
    labels: ['linux'],
    labelSetIndex: 0,
    mandatoryLabels: [],
    resources: { requests: { cpus: 1, memBytes: 1 }, limits: { cpus: 1, memBytes: 1 } },
    emit: () => {},
  };
}

/** Records what a FakeBackend calls on its manager. */
function host() {
  const log: string[] = [];
  return {
    log,
    onAgentRegistered: (agentId: string, labels: readonly string[] = []) => {
      log.push(`registered ${agentId} [${labels.join(',')}]`);
      return { mandatoryLabels: [], boundJobId: `job-of-${agentId}` };
    },
    correlateAgentToJob: (agentId: string, runId: string, jobId: string) => {
      log.push(`correlate ${agentId} ${runId} ${jobId}`);
    },
    onJobComplete: (agentId: string) => {
      log.push(`complete ${agentId}`);
    },
    onAgentDisconnected: async (agentId: string) => {
      log.push(`disconnected ${agentId}`);
    },
  };
}

describe('FakeBackend', () => {
  it('records every call with its clock time, arguments and outcome', async () => {
    const clock = new TestClock(T0);
    const backend = new FakeBackend({ clock, latencyMs: { destroy: 500 } });
    await backend.spawn(request('a1', 'j1'));
    await clock.advance(1000);
    const destroying = backend.destroy('a1');
    await clock.advance(500);
    await destroying;
    expect(await backend.list()).toEqual([]);
    await backend.shutdown();
    expect(
      backend.calls.map((c) => [c.method, c.at - T0, c.settledAt! - T0, c.outcome, c.agentId]),
    ).toEqual([
      ['spawn', 0, 0, 'ok', 'a1'],
      ['destroy', 1000, 1500, 'ok', 'a1'],
      ['list', 1500, 1500, 'ok', undefined],
      ['shutdown', 1500, 1500, 'ok', undefined],
    ]);
    expect((backend.calls[0]!.args[0] as SpawnRequest).jobId).toBe('j1');
  });

  it('failNext fails the next n calls, then answers normally; a failed spawn runs nothing', async () => {
    const backend = new FakeBackend();
    const quota = new Error('quota exceeded');
    backend.failNext(2, quota);
    await expect(backend.spawn(request('a1'))).rejects.toBe(quota);
    await expect(backend.spawn(request('a2'))).rejects.toBe(quota);
    expect(backend.running()).toEqual([]);
    await expect(backend.spawn(request('a3'))).resolves.toEqual({
      context: { backend: 'fake', fake: true },
    });
    expect(backend.running()).toEqual(['a3']);
    expect(backend.calls.map((c) => c.outcome)).toEqual(['failed', 'failed', 'ok']);
    backend.failNext(1, undefined, 'destroy');
    await expect(backend.destroy('a3')).rejects.toThrow(/scripted destroy failure/);
    expect(backend.running()).toEqual(['a3']);
  });

  it('scripts by predicate, with latency on the clock, and a spawn that never settles', async () => {
    const clock = new TestClock(T0);
    const backend = new FakeBackend({ clock });
    backend
      .script({ when: (c) => (c.args[0] as SpawnRequest).warm, times: Infinity, latencyMs: 30_000 })
      .script({ when: (c) => c.agentId === 'stuck', hang: true })
      .script({ when: (c) => c.agentId === 'ctx', result: { context: { vm: 'i-123' } } });
    let warmDone = false;
    void backend.spawn(request('warm-1')).then(() => {
      warmDone = true;
    });
    let stuckDone = false;
    void backend.spawn(request('stuck', 'j')).finally(() => {
      stuckDone = true;
    });
    expect(await backend.spawn(request('ctx', 'j2'))).toEqual({ context: { vm: 'i-123' } });
    await clock.advance(29_999);
    expect(warmDone).toBe(false);
    await clock.advance(1);
    expect(warmDone).toBe(true);
    await clock.advance(3_600_000);
    expect(stuckDone).toBe(false);
    expect(backend.agent('stuck')?.state).toBe('starting');
    expect(backend.callsOf('spawn').map((c) => c.outcome)).toEqual(['ok', 'hung', 'ok']);
  });

  it("a hanging spawn rejects with the signal's reason once its request is aborted, and starts nothing", async () => {
    const clock = new TestClock(T0);
    const backend = new FakeBackend({ clock });
    backend.hangNext();
    const abort = new AbortController();
    const spawn = backend.spawn({ ...request('stuck', 'j'), signal: abort.signal });
    await clock.advance(60_000);
    expect(backend.agent('stuck')?.state).toBe('starting');
    const reason = new Error('given up');
    abort.abort(reason);
    await expect(spawn).rejects.toBe(reason);
    expect(backend.running()).toEqual([]);
    expect(backend.callsOf('spawn')[0]).toMatchObject({ outcome: 'failed', error: reason });
  });

  it('plays agent and dispatcher: registers after a delay, runs the bound job, completes it', async () => {
    const clock = new TestClock(T0);
    const manager = host();
    const backend = new FakeBackend({
      clock,
      manager,
      registerAfterMs: 15_000,
      jobDurationMs: 60_000,
    });
    await backend.spawn(request('a1', 'j1'));
    expect(backend.agent('a1')?.state).toBe('started');
    await clock.advance(15_000);
    expect(backend.agent('a1')).toMatchObject({ state: 'busy', jobId: 'job-of-a1' });
    await clock.advance(60_000);
    expect(manager.log).toEqual([
      'registered a1 [linux]',
      'correlate a1 run-job-of-a1 job-of-a1',
      'complete a1',
    ]);
    expect(backend.jobsCompleted).toEqual([
      {
        agentId: 'a1',
        jobId: 'job-of-a1',
        runId: 'run-job-of-a1',
        startedAt: T0 + 15_000,
        completedAt: T0 + 75_000,
      },
    ]);
    backend.runJob('a1', 'j9', Number.POSITIVE_INFINITY, 'r9');
    expect(() => backend.runJob('a1', 'j10', 10)).toThrow(/busy with job "j9"/);
    await clock.advance(86_400_000);
    expect(backend.agent('a1')?.state).toBe('busy');
    await backend.crash('a1');
    expect(manager.log.at(-1)).toBe('disconnected a1');
    expect(backend.running()).toEqual([]);
  });

  it('a destroyed agent does not register later; timers go with it', async () => {
    const clock = new TestClock(T0);
    const manager = host();
    const backend = new FakeBackend({ clock, manager, registerAfterMs: 10_000 });
    await backend.spawn(request('a1'));
    await backend.destroy('a1');
    await clock.advance(20_000);
    expect(manager.log).toEqual([]);
    expect(clock.pending()).toEqual([]);
  });

  it('holdNext holds calls until released; then they answer as scripted', async () => {
    const backend = new FakeBackend();
    const release = backend.holdNext(Number.POSITIVE_INFINITY);
    backend.failNext(1, new Error('quota'));
    const settled: string[] = [];
    const first = backend.spawn(request('a1')).then(
      () => settled.push('a1 ok'),
      () => settled.push('a1 failed'),
    );
    const second = backend.spawn(request('a2')).then(() => settled.push('a2 ok'));
    await new Promise((r) => setImmediate(r));
    expect(settled).toEqual([]);
    expect(backend.agent('a1')?.state).toBe('starting');
    expect(backend.callsOf('spawn').map((c) => c.outcome)).toEqual(['pending', 'pending']);
    release();
    release(); // twice: nothing more
    await Promise.all([first, second]);
    expect(settled).toEqual(['a1 failed', 'a2 ok']);
    // Released: later calls are not held.
    await backend.spawn(request('a3'));
    // A hold of one destroy.
    const releaseDestroy = backend.holdNext(1, 'destroy');
    let destroyed = false;
    const destroying = backend.destroy('a2').then(() => {
      destroyed = true;
    });
    await backend.destroy('a3'); // the second destroy is not held
    await new Promise((r) => setImmediate(r));
    expect(destroyed).toBe(false);
    expect(backend.running()).toEqual(['a2']);
    releaseDestroy();
    await destroying;
    expect(backend.destroyed()).toEqual(['a3', 'a2']);
    expect(backend.spawned().map((r) => r.agentId)).toEqual(['a1', 'a2', 'a3']);
    expect(() => backend.holdNext(0)).toThrow(/times/);
    expect(() => backend.holdNext(1, 'kill' as never)).toThrow(/method/);
  });

  it('destroyed() lists only destroys that succeeded; onCall sees each call as it is made', async () => {
    const seen: string[] = [];
    const backend = new FakeBackend({
      onCall: (call) => {
        seen.push(
          `${call.method} ${call.agentId ?? ''} ${call.outcome} running=${backend.running().join(',')}`,
        );
        if (call.method === 'spawn') (call.args[0] as SpawnRequest).emit({ kind: 'pulled' });
      },
    });
    const emitted: string[] = [];
    await backend.spawn({ ...request('a1'), emit: (e) => emitted.push(e.kind) });
    backend.failNext(1, new Error('busy'), 'destroy');
    await expect(backend.destroy('a1')).rejects.toThrow('busy');
    await backend.destroy('a1');
    expect(backend.destroyed()).toEqual(['a1']);
    expect(backend.callsOf('destroy')).toHaveLength(2);
    expect(emitted).toEqual(['pulled']);
    expect(seen).toEqual([
      'spawn a1 pending running=',
      'destroy a1 pending running=a1',
      'destroy a1 pending running=a1',
    ]);
    expect(() => new FakeBackend({ onCall: 5 } as never)).toThrow(/onCall/);
  });

  it('leaves list() or shutdown() out when asked, as a backend without them', async () => {
    const bare = new FakeBackend({ list: false, shutdown: false });
    expect(bare.list).toBeUndefined();
    expect(bare.shutdown).toBeUndefined();
    await bare.spawn(request('a1'));
    expect(bare.running()).toEqual(['a1']);
    const full = new FakeBackend({ list: true });
    expect(typeof full.list).toBe('function');
    expect(typeof full.shutdown).toBe('function');
    expect(() => new FakeBackend({ list: 'no' } as never)).toThrow(/`list` to be a boolean/);
    const checks = scalerBackendConformance(
      () => new FakeBackend({ list: false, shutdown: false }),
      {
        list: false,
      },
    );
    expect(await failedChecks(checks)).toEqual([]);
  });

  it('crash with { disconnect: false }: the agent stops, and the manager hears nothing', async () => {
    const manager = host();
    const backend = new FakeBackend({ manager });
    await backend.spawn(request('a1'));
    await backend.crash('a1', { disconnect: false });
    expect(backend.running()).toEqual([]);
    expect(await backend.list()).toEqual([]);
    expect(manager.log).toEqual([]);
    await expect(backend.crash('a1')).rejects.toThrow(/does not run/);
  });

  it('refuses bad options and misuse with clear errors', () => {
    expect(() => new FakeBackend({ latency: 5 } as never)).toThrow(/Unknown FakeBackend option/);
    expect(() => new FakeBackend({ latencyMs: -1 })).toThrow(/latencyMs/);
    expect(() => new FakeBackend({ latencyMs: { spwan: 1 } as never })).toThrow(/spwan/);
    const backend = new FakeBackend();
    expect(() => backend.failNext(0)).toThrow(/times/);
    expect(() => backend.script({ method: 'kill' as never })).toThrow(/method/);
    expect(() => backend.register('nobody')).toThrow(/does not run/);
    expect(() => backend.attach({} as never)).toThrow(/ScalerManager/);
  });
});

async function failedChecks(checks: ConformanceCheck[]) {
  const names: string[] = [];
  for (const check of checks) await check.run().catch(() => names.push(check.name));
  return names;
}

describe('scalerBackendConformance', () => {
  for (const check of scalerBackendConformance(() => new FakeBackend())) {
    it(`FakeBackend: ${check.name}`, check.run);
  }

  /** A backend that keeps listing destroyed agents and throws for unknown ones. */
  class Leaky implements ScalerBackend {
    readonly ever = new Set<string>();
    async spawn(req: SpawnRequest) {
      this.ever.add(req.agentId);
      return undefined;
    }
    async destroy(agentId: string) {
      if (!this.ever.has(agentId)) throw new Error(`no such agent ${agentId}`);
    }
    async list() {
      return [...this.ever];
    }
  }

  /** A backend whose spawn answers a non-object and whose list repeats names. */
  class Sloppy extends FakeBackend {
    override async spawn(req: SpawnRequest) {
      await super.spawn(req);
      return 'started' as never;
    }
    override async list() {
      const names = await super.list();
      return [...names, ...names];
    }
  }

  async function failed(checks: ConformanceCheck[]) {
    const names: string[] = [];
    for (const check of checks) await check.run().catch(() => names.push(check.name));
    return names;
  }

  it('each broken backend fails a check', async () => {
    expect(await failed(scalerBackendConformance(() => new Leaky()))).toEqual([
      'destroy is idempotent: twice, or for an agent that never ran, it resolves',
      'a spawned agent is listed until it is destroyed',
      'shutdown() (or destroy per agent, for a backend without it) leaves nothing running',
    ]);
    expect(await failed(scalerBackendConformance(() => new Sloppy()))).toEqual([
      'spawn resolves to nothing, or an object whose context is an object',
      'several spawns at once all run, and list() names each once',
    ]);
  });

  it('a backend without list() runs the checks that need none with { list: false }', async () => {
    const bare: ScalerBackend = { spawn: async () => undefined, destroy: async () => {} };
    const checks = scalerBackendConformance(() => bare, { list: false });
    expect(checks.map((c) => c.name)).toHaveLength(2);
    expect(await failed(checks)).toEqual([]);
    expect(await failed(scalerBackendConformance(() => bare))).toHaveLength(3);
  });
});
