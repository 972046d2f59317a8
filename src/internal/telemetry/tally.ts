/**
 * Per-key state without per-call allocation. An SDK counter hashes its
 * attributes on every `add` (sorts the keys, builds a JSON string); on a hot
 * path (every `requestScale`, every ledger call) that cost was most of the
 * telemetry's. Here a key is up to five low-cardinality parts looked up in
 * nested maps (no key string is built), the attribute object of a key is made
 * once, and counters are totalled in memory and handed to an observable
 * counter when the SDK collects.
 */
import type {
  OtelAttributes,
  OtelInstrumentOptions,
  OtelMeter,
  OtelObservable,
  OtelObservableCallback,
} from './api.js';

/** One part of a key: a scaler or pool name, a result kind, a flag. */
export type KeyPart = string | number | boolean | undefined;

/** Builds the value of a key the first time it is seen. */
export type KeyMaker<V> = (a: KeyPart, b: KeyPart, c: KeyPart, d: KeyPart, e: KeyPart) => V;

/**
 * Keys are low-cardinality by construction (names from the configuration,
 * closed sets of kinds); this bound is a backstop: past it, values are made
 * per call and not kept, and a Tally counts into its overflow entry.
 */
const MAX_KEYS = 10_000;

interface Node<V> {
  value: V | undefined;
  children: Map<KeyPart, Node<V>> | undefined;
}

/**
 * Values under keys of up to five parts, each made once by `make`. Trailing
 * `undefined` parts do not count: `(a, b)` and `(a, b, undefined)` are one key,
 * and a lookup walks only as many levels as the key has parts.
 */
export class KeyedCache<V> {
  readonly #root: Node<V> = { value: undefined, children: undefined };
  readonly #make: KeyMaker<V>;
  readonly #kept: ((value: V) => void) | undefined;
  #size = 0;

  /**
   * @param make - Makes the value of a new key.
   * @param kept - Called with each value the first time it is kept.
   */
  constructor(make: KeyMaker<V>, kept?: (value: V) => void) {
    this.#make = make;
    this.#kept = kept;
  }

  /** The value under the key, or `undefined` when the key is new and the cache is full. */
  find(a?: KeyPart, b?: KeyPart, c?: KeyPart, d?: KeyPart, e?: KeyPart): V | undefined {
    const hasSpace = this.#size < MAX_KEYS;
    const depth =
      e !== undefined ? 5 : d !== undefined ? 4 : c !== undefined ? 3 : b !== undefined ? 2 : 1;
    let node = step(this.#root, a, hasSpace);
    if (depth > 1 && node !== undefined) node = step(node, b, hasSpace);
    if (depth > 2 && node !== undefined) node = step(node, c, hasSpace);
    if (depth > 3 && node !== undefined) node = step(node, d, hasSpace);
    if (depth > 4 && node !== undefined) node = step(node, e, hasSpace);
    if (node === undefined) return undefined;
    let value = node.value;
    if (value === undefined && hasSpace) {
      value = this.#make(a, b, c, d, e);
      node.value = value;
      this.#size++;
      this.#kept?.(value);
    }
    return value;
  }

  /** The value under the key, made now (and not kept) when the cache is full. */
  get(a?: KeyPart, b?: KeyPart, c?: KeyPart, d?: KeyPart, e?: KeyPart): V {
    return this.find(a, b, c, d, e) ?? this.#make(a, b, c, d, e);
  }
}

function step<V>(parent: Node<V>, key: KeyPart, create: boolean): Node<V> | undefined {
  let child = parent.children?.get(key);
  if (child === undefined && create) {
    child = { value: undefined, children: undefined };
    parent.children ??= new Map();
    parent.children.set(key, child);
  }
  return child;
}

interface Entry {
  readonly attributes: OtelAttributes;
  value: number;
}

/**
 * A monotonic counter totalled in memory and observed at collection: `add`
 * finds the key's entry (no allocation once the key was seen) and adds to it.
 */
export class Tally {
  readonly #keys: KeyedCache<Entry>;
  readonly #entries: Entry[] = [];
  readonly #overflow: Entry = { attributes: { 'otel.metric.overflow': true }, value: 0 };
  readonly #instrument: OtelObservable;
  readonly #callback: OtelObservableCallback;

  /** @param describe - The attributes of a key (called once per key). */
  constructor(
    meter: OtelMeter,
    name: string,
    options: OtelInstrumentOptions,
    describe: KeyMaker<OtelAttributes>,
  ) {
    this.#keys = new KeyedCache(
      (a, b, c, d, e) => ({ attributes: describe(a, b, c, d, e), value: 0 }),
      (entry) => this.#entries.push(entry),
    );
    this.#instrument = meter.createObservableCounter(name, options);
    this.#callback = (result) => {
      for (const entry of this.#entries) result.observe(entry.value, entry.attributes);
      if (this.#overflow.value > 0) result.observe(this.#overflow.value, this.#overflow.attributes);
    };
    this.#instrument.addCallback(this.#callback);
  }

  /** Add `n` under the key. */
  add(n: number, a?: KeyPart, b?: KeyPart, c?: KeyPart, d?: KeyPart, e?: KeyPart): void {
    const entry = this.#keys.find(a, b, c, d, e) ?? this.#overflow;
    entry.value += n;
  }

  /** Stop reporting. */
  close(): void {
    this.#instrument.removeCallback(this.#callback);
  }
}
