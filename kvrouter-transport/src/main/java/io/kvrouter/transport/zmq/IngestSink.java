package io.kvrouter.transport.zmq;

import io.kvrouter.event.RouterEvent;
import io.kvrouter.index.KvIndex;
import io.kvrouter.transport.kvevents.StorageTier;
import java.util.Objects;

/** Where ingested router events go. Called on the subscriber's thread, in the engine's order. */
@FunctionalInterface
public interface IngestSink {

  /** Takes one event about blocks in {@code tier}. */
  void accept(StorageTier tier, RouterEvent event);

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
