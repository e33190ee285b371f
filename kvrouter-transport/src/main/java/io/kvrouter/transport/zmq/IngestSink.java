package io.kvrouter.transport.zmq;

import io.kvrouter.event.RouterEvent;
import io.kvrouter.index.KvIndex;
import io.kvrouter.transport.kvevents.GroupEvent;
import io.kvrouter.transport.kvevents.StorageTier;
import java.util.Objects;

/** Where ingested router events go. Called on the subscriber's thread, in the engine's order. */
@FunctionalInterface
public interface IngestSink {

  /** Takes one event about blocks in {@code tier}. */
  void accept(StorageTier tier, RouterEvent event);

  /**
   * Takes one event of a secondary KV cache group of a hybrid model (docs/routing.md, "Hybrid
   * models"), after the batch's {@link #accept} events. The default drops it: a sink that does not
   * score hybrid models sees the main group alone, as before groups were published.
   */
  default void acceptGroup(GroupEvent event) {}

  /**
   * Applies device-tier events to {@code index} and drops the others (offloaded copies are not what
   * the router scores). The index must accept writes from the subscriber's thread while others
   * read: use {@code concurrentRadixTree()}, {@code positional(j)} or {@code threadPool}.
   */
  static IngestSink deviceIndex(KvIndex index) {
    Objects.requireNonNull(index, "index");
    return (tier, event) -> {
      if (tier == StorageTier.DEVICE) {
        index.apply(event);
      }
    };
  }
}
