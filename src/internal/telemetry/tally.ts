/**
 * Counters kept by us and reported at collection. An SDK counter hashes its
 * attributes on every `add`; on a hot path (every `requestScale`, every ledger
 * call) that cost is most of the telemetry's. A tally adds to a number found
 * by a short key, builds the attribute object once per key, and hands the
 * totals to an observable counter when the SDK collects.
 */
import type {
  OtelAttributes,
  OtelInstrumentOptions,
  OtelMeter,
  OtelObservable,
  OtelObservableCallback,
} from './api.js';

interface Entry {
  attributes: OtelAttributes;
  value: number;
}

/** A monotonic counter totalled in memory and observed at collection. */
export class Tally {
  readonly #entries = new Map<string, Entry>();
  readonly #instrument: OtelObservable;
  readonly #callback: OtelObservableCallback;

  constructor(meter: OtelMeter, name: string, options: OtelInstrumentOptions) {
    this.#instrument = meter.createObservableCounter(name, options);
    this.#callback = (result) => {
      for (const entry of this.#entries.values()) result.observe(entry.value, entry.attributes);
    };
    this.#instrument.addCallback(this.#callback);
  }

  /** Add `n` under `key`; `attributes` is called only the first time a key is seen. */
  add(key: string, attributes: () => OtelAttributes, n = 1): void {
    const entry = this.#entries.get(key);
    if (entry !== undefined) entry.value += n;
    else this.#entries.set(key, { attributes: attributes(), value: n });
  }

  /** Stop reporting. */
  close(): void {
    this.#instrument.removeCallback(this.#callback);
  }
}

/** Attribute objects built once per key (histograms record with them). */
export class AttributeCache {
  readonly #cache = new Map<string, OtelAttributes>();

  /** The attributes under `key`, built by `make` the first time. */
  get(key: string, make: () => OtelAttributes): OtelAttributes {
    let attributes = this.#cache.get(key);
    if (attributes === undefined) {
      attributes = make();
      // Bounded: keys are low-cardinality by construction; this is a backstop.
      if (this.#cache.size < 10_000) this.#cache.set(key, attributes);
    }
    return attributes;
  }
}
