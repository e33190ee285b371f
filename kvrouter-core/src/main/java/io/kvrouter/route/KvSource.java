package io.kvrouter.route;

import java.util.Locale;

/**
 * How a router knows what a worker rank caches: from the engine's KV events, exact, or from its own
 * routing decisions, predicted (approximate mode, for engines that publish no events; corrected by
 * the cached tokens each answer reports). One router may hold ranks of both kinds (docs/routing.md,
 * "Mixed fleets").
 */
public enum KvSource {
  /** The engine's KV events (ZMQ, {@code POST /events}, NATS) keep the index exact. */
  EVENTS,
  /** The router predicts the cache from its own decisions (approximate mode). */
  PREDICTED;

  /** The name on the wire: {@code events} or {@code predicted}. */
  public String wireName() {
    return name().toLowerCase(Locale.ROOT);
  }

  /**
   * The source named {@code s} ({@code events} or {@code predicted}, any case).
   *
   * @throws IllegalArgumentException naming the accepted values
   */
  public static KvSource parse(String s) {
    for (KvSource k : values()) {
      if (k.wireName().equalsIgnoreCase(s)) return k;
    }
    throw new IllegalArgumentException("must be events or predicted, got '" + s + "'");
  }
}
