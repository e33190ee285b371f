package io.kvrouter.transport.kvevents;

import io.kvrouter.event.RouterEvent;
import java.util.Objects;

/** A router event together with the storage tier of the blocks it names. */
public record TieredEvent(StorageTier tier, RouterEvent event) {
  public TieredEvent {
    Objects.requireNonNull(tier, "tier");
    Objects.requireNonNull(event, "event");
  }
}
