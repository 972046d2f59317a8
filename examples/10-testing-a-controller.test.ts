/**
 * Testing a CI controller with `scaler-primitives/testing`: a small controller
 * that scales up when jobs wait and retries when a spawn fails or an agent
 * never registers, tested end to end on virtual time. A day of timeouts runs
 * in milliseconds. Walked through in docs/testing.md.
 *
 * Run: npx vitest run examples/10-testing-a-controller.test.ts (in a clone). From an
 * installed package, copy it into your tests first: vitest skips node_modules.
 */
import type { Clock, ClockTimer } from 'scaler-primitives';
import type { ScalerConfigInput, ScalerEvent, ScalerManager } from 'scaler-primitives/manager';
import {
  createTestFleet,
  type FleetBackendOptions,
  type TestFleet,
} from 'scaler-primitives/testing';
import { afterEach, describe, expect, it } from 'vitest';

// ---------------------------------------------------------------- the code under test

interface Job {
  id: string;
  labels: string[];
}

/**
 * The host's controller: every waiting job asks the manager for an agent; a
 * job that could not get one (a failed spawn, a full pool, an agent pruned
 * because it never registered) is asked for again `retryMs` later.
 */
class Controller {
  readonly waiting = new Map<string, Job>();
  readonly failed: string[] = [];
  readonly #retries = new Set<ClockTimer>();

  constructor(
    private readonly manager: ScalerManager,
    private readonly clock: Clock,
    private readonly retryMs = 30_000,
  ) {}

  async submit(job: Job): Promise<void> {
    this.waiting.set(job.id, job);
    await this.#scale(job);
  }

  /** Wire to the manager's `onEvent`. */
  onEvent(event: ScalerEvent): void {
    if (event.source === 'manager' && event.kind === 'busy') this.waiting.delete(event.data.jobId);
    // An agent that never registered was pruned: its job still waits.
    if (event.kind === 'pruned') {
      for (const job of this.waiting.values()) this.#retryLater(job);
    }
  }

  async shutdown(): Promise<void> {
    for (const timer of this.#retries) this.clock.clearTimeout(timer);
    this.#retries.clear();
    await this.manager.shutdownAll();
  }

  async #scale(job: Job): Promise<void> {
    const result = await this.manager.requestScale({ jobId: job.id, labels: job.labels });
    switch (result.kind) {
      case 'spawned':
      case 'already-spawning':
        return;
      case 'spawn-failed':
      case 'at-capacity':
        this.#retryLater(job);
        return;
      default: // no-match, never-fits: no retry can help
        this.waiting.delete(job.id);
        this.failed.push(job.id);
    }
  }

  #retryLater(job: Job): void {
    const timer = this.clock.setTimeout(() => {
      this.#retries.delete(timer);
      if (this.waiting.has(job.id)) void this.#scale(job);
    }, this.retryMs);
    this.#retries.add(timer);
  }
}

// ---------------------------------------------------------------- the tests

const config: ScalerConfigInput = {
  globalMaxAgents: 10,
  machinePools: { 'build-host': { maxCpu: 8, maxMemory: '16Gi' } },
  scalers: [
    {
      name: 'linux',
      type: 'container',
      maxAgents: 3,
      machinePool: 'build-host',
      labelSets: [{ labels: ['linux'], resources: { cpus: 2, memory: '4Gi' } }],
    },
  ],
};

const MINUTE = 60_000;
let fleet: TestFleet;
let controller: Controller;

function setUp(backend: FleetBackendOptions) {
  fleet = createTestFleet(config, {
    backend,
    manager: {
      registrationTimeoutMs: 5 * MINUTE,
      onEvent: (event) => controller.onEvent(event),
    },
  });
  controller = new Controller(fleet.manager, fleet.clock);
}

afterEach(async () => {
  await controller.shutdown();
  await fleet.ledger.close();
});

describe('the controller', () => {
  it('scales up on demand, up to the scaler limit, and the next job waits for room', async () => {
    setUp({ registerAfterMs: 20_000, jobDurationMs: 10 * MINUTE });
    const linux = fleet.backends.linux!;
    for (const id of ['j1', 'j2', 'j3', 'j4']) await controller.submit({ id, labels: ['linux'] });
    expect(linux.running()).toEqual(['linux-1', 'linux-2', 'linux-3']); // maxAgents: 3
    fleet.checkInvariants();

    await fleet.clock.advance(20_000); // the three register and start their jobs
    expect([...controller.waiting.keys()]).toEqual(['j4']);
    expect(linux.agent('linux-1')).toMatchObject({ state: 'busy', jobId: 'j1' });
    fleet.checkInvariants();

    // The agents stay after their jobs (no idle timeout configured): the host
    // gives j4 to one of them once it is free, as its dispatcher would.
    await fleet.clock.advance(10 * MINUTE);
    linux.runJob('linux-1', 'j4', 10 * MINUTE);
    expect(controller.waiting.size).toBe(0);
    fleet.checkInvariants();
  });

  it('an agent that never registers is pruned after the registration timeout, and the job gets another', async () => {
    setUp({}); // agents register only when the test says so
    const linux = fleet.backends.linux!;
    await controller.submit({ id: 'j1', labels: ['linux'] });

    // The timeout, then the next maintenance pass: every 5 s plus up to 10% jitter, so
    // a 10 s window always holds one.
    await fleet.clock.advance(5 * MINUTE + 10_000);
    expect(fleet.events.filter((e) => e.kind === 'pruned').map((e) => e.agentId)).toEqual([
      'linux-1',
    ]);
    expect(linux.callsOf('destroy').map((c) => c.agentId)).toEqual(['linux-1']);
    fleet.checkInvariants(); // its reservation went with it

    await fleet.clock.advance(30_000); // the controller's retry
    expect(linux.running()).toEqual(['linux-2']);
    linux.register('linux-2');
    linux.runJob('linux-2', 'j1', 5 * MINUTE);
    expect(controller.waiting.size).toBe(0);
    fleet.checkInvariants();
  });

  it('a backend that fails twice: the third try, a minute later, starts the agent', async () => {
    setUp({ registerAfterMs: 20_000, jobDurationMs: 10 * MINUTE });
    const linux = fleet.backends.linux!;
    linux.failNext(2, new Error('cloud API: quota exceeded'));
    const started = fleet.clock.now();

    await controller.submit({ id: 'j1', labels: ['linux'] });
    await fleet.clock.advance(2 * MINUTE);

    expect(
      linux.callsOf('spawn').map((c) => [(c.at - started) / 1000, c.outcome, c.agentId]),
    ).toEqual([
      [0, 'failed', 'linux-1'],
      [30, 'failed', 'linux-2'],
      [60, 'ok', 'linux-3'],
    ]);
    expect(fleet.manager.getStatus().counters.spawnFailures).toBe(2);
    expect(linux.agent('linux-3')).toMatchObject({ state: 'busy', jobId: 'j1' });
    fleet.checkInvariants(); // the failed spawns left no reservation behind
  });

  it('shutdown stops every agent and releases every reservation', async () => {
    setUp({ registerAfterMs: 20_000, jobDurationMs: Number.POSITIVE_INFINITY });
    for (const id of ['j1', 'j2']) await controller.submit({ id, labels: ['linux'] });
    await fleet.clock.advance(MINUTE);
    expect((await fleet.ledger.list('build-host')).length).toBe(2);

    await controller.shutdown();

    expect(fleet.backends.linux!.callsOf('shutdown')).toHaveLength(1);
    expect(fleet.backends.linux!.running()).toEqual([]);
    expect(await fleet.ledger.list('build-host')).toEqual([]);
    expect(fleet.clock.pending().filter((t) => t.ref)).toEqual([]); // nothing left to fire
    fleet.checkInvariants();
  });
});
