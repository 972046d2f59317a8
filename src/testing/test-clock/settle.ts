/**
 * How a TestClock lets the promise chains a timer started settle: drain the
 * microtask and `process.nextTick` queues (cheap, and enough for chains that
 * only await promises), then take real event-loop turns only while something
 * a turn would run is still pending (an immediate, an I/O request in flight).
 * A simulated day fires tens of thousands of timers; a real turn for each
 * (a `setImmediate`, an `epoll_wait`) was most of its wall time.
 * @internal
 */
import { nextTurn } from '../../clock.js';

// A nextTick callback runs once the microtask queue is empty, and its
// continuation after every microtask queued before it; a few rounds cover
// chains that alternate between nextTick and promises.
const DRAIN_ROUNDS = 4;

function tick(): Promise<void> {
  return new Promise((resolve) => process.nextTick(resolve));
}

/** Drain the microtask and nextTick queues, chains that hop between them included. @internal */
export async function drainMicrotasks(): Promise<void> {
  for (let i = 0; i < DRAIN_ROUNDS; i++) await tick();
}

// Long-lived handles: open while idle, so their presence says nothing is in
// flight. Anything else process.getActiveResourcesInfo() lists (an
// `Immediate`, `FSReqCallback`, `FSReqPromise`, `GetAddrInfoReqWrap`,
// `WriteWrap`, ... or a kind this list does not know) counts as pending.
const IDLE_HANDLES = new Set([
  'Timeout',
  'TTYWrap',
  'TCPWrap',
  'TCPSERVERWRAP',
  'TCPServerWrap',
  'PipeWrap',
  'PIPESERVERWRAP',
  'PipeServerWrap',
  'UDPWrap',
  'ProcessWrap',
  'SignalWrap',
  'FSEventWrap',
  'StatWatcher',
  'MessagePort',
  'Worker',
]);

/**
 * Whether a real event-loop turn would run something now: an immediate is
 * queued or an I/O request is in flight.
 * @internal
 */
export function turnPending(): boolean {
  for (const kind of process.getActiveResourcesInfo()) {
    if (!IDLE_HANDLES.has(kind)) return true;
  }
  return false;
}

/**
 * Let chains settle: drain the microtask queues, then up to `turns` times,
 * while a turn would run something, take one real turn and drain again.
 * @internal
 */
export async function settleChains(turns: number): Promise<void> {
  await drainMicrotasks();
  for (let i = 0; i < turns && turnPending(); i++) {
    await nextTurn();
    await drainMicrotasks();
  }
}
