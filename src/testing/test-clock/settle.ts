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

/**
 * Drain the microtask and nextTick queues, chains that hop between them
 * included: {@link DRAIN_ROUNDS} rounds, each a nextTick followed by a
 * microtask. Callbacks rather than awaits: one promise per drain instead of
 * one per round (a simulated day drains after every one of its tens of
 * thousands of timers).
 * @internal
 */
export function drainMicrotasks(): Promise<void> {
  return new Promise((resolve) => drain(resolve));
}

// Microtask hops after the last round before the caller resumes: as many as
// the awaits of the nested async functions this replaced took, so a promise
// chain the last round started gets as far before the next timer fires.
const TAIL_HOPS = 4;

// A microtask by `resolved.then(fn)`: queueMicrotask makes an AsyncResource
// for every call, several times the garbage.
const resolved = Promise.resolve();

// Run DRAIN_ROUNDS rounds, then call `done` TAIL_HOPS microtasks later.
function drain(done: () => void): void {
  let left = DRAIN_ROUNDS;
  let hops = TAIL_HOPS;
  const round = () => process.nextTick(ticked);
  const ticked = () => void resolved.then(--left === 0 ? tail : round);
  const tail = () => {
    if (--hops === 0) done();
    else void resolved.then(tail);
  };
  round();
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
export function settleChains(turns: number): Promise<void> {
  return new Promise((resolve, reject) => {
    let left = turns;
    const drained = () => {
      // Looked at once the queues are empty, as the turn would run now.
      if (left > 0 && turnPending()) {
        left--;
        nextTurn().then(() => drain(drained), reject);
      } else resolve();
    };
    drain(drained);
  });
}
