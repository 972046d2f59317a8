/**
 * The TestClock's timers and the queue they wait in: a binary min-heap on
 * (due instant, schedule order), with each timer knowing its slot so that a
 * cancel or an interval's next period moves it in place (no per-firing
 * allocation, no sorting).
 * @internal
 */
import type { ClockTimer } from '../../clock.js';

/** A delay Node accepts; anything else becomes 1 ms. */
export const TIMEOUT_MAX = 2 ** 31 - 1;

/** One timer of a TestClock (the handle `setTimeout`/`setInterval` return). @internal */
export class VirtualTimer implements ClockTimer {
  refed = true;
  /** Its slot in the heap, or -1 once it fired (a timeout) or was cancelled. */
  index = -1;
  /** Schedule order: among timers due at the same instant, the lower fires first. */
  seq = 0;
  constructor(
    readonly id: number,
    readonly fn: () => void,
    public dueAt: number,
    readonly intervalMs: number | undefined,
  ) {}
  ref(): ClockTimer {
    this.refed = true;
    return this;
  }
  unref(): ClockTimer {
    this.refed = false;
    return this;
  }
  hasRef(): boolean {
    return this.refed;
  }
}

/** The timers waiting on one TestClock, soonest first. @internal */
export class TimerQueue {
  readonly #heap: VirtualTimer[] = [];
  #seq = 0;

  /** How many timers wait. */
  get size(): number {
    return this.#heap.length;
  }

  /** Whether a waiting timer keeps the clock going (not unref'd). */
  hasRefed(): boolean {
    // ref()/unref() flip a flag on the handle, so look on demand.
    for (const timer of this.#heap) if (timer.refed) return true;
    return false;
  }

  /** Whether `timer` waits in this queue. */
  has(timer: VirtualTimer): boolean {
    return timer.index >= 0 && this.#heap[timer.index] === timer;
  }

  /** The soonest timer, without removing it. */
  peek(): VirtualTimer | undefined {
    return this.#heap[0];
  }

  /** Every waiting timer, in no particular order. */
  all(): readonly VirtualTimer[] {
    return this.#heap;
  }

  /** Queue `timer` (not waiting yet) to fire at `dueAt`, after those queued before it for then. */
  push(timer: VirtualTimer, dueAt: number): void {
    timer.dueAt = dueAt;
    timer.seq = ++this.#seq;
    timer.index = this.#heap.length;
    this.#heap.push(timer);
    this.#up(timer.index);
  }

  /** Move the waiting soonest timer to `dueAt` (an interval's next period), in place. */
  rescheduleTop(dueAt: number): void {
    const top = this.#heap[0]!;
    top.dueAt = dueAt;
    top.seq = ++this.#seq;
    this.#down(0);
  }

  /** Take `timer` out of the queue; false when it was not waiting. */
  remove(timer: VirtualTimer): boolean {
    if (!this.has(timer)) return false;
    const heap = this.#heap;
    const i = timer.index;
    const last = heap.pop()!;
    timer.index = -1;
    if (last !== timer) {
      heap[i] = last;
      last.index = i;
      this.#down(i);
      this.#up(last.index);
    }
    return true;
  }

  #up(i: number): void {
    const heap = this.#heap;
    const timer = heap[i]!;
    while (i > 0) {
      const parentIndex = (i - 1) >> 1;
      const parent = heap[parentIndex]!;
      if (!before(timer, parent)) break;
      heap[i] = parent;
      parent.index = i;
      i = parentIndex;
    }
    heap[i] = timer;
    timer.index = i;
  }

  #down(i: number): void {
    const heap = this.#heap;
    const n = heap.length;
    const timer = heap[i]!;
    for (;;) {
      const l = 2 * i + 1;
      if (l >= n) break;
      const r = l + 1;
      const child = r < n && before(heap[r]!, heap[l]!) ? r : l;
      const next = heap[child]!;
      if (!before(next, timer)) break;
      heap[i] = next;
      next.index = i;
      i = child;
    }
    heap[i] = timer;
    timer.index = i;
  }
}

function before(a: VirtualTimer, b: VirtualTimer): boolean {
  return a.dueAt < b.dueAt || (a.dueAt === b.dueAt && a.seq < b.seq);
}
