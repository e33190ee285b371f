package io.kvrouter.transport.kvevents;

import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.index.KvCacheGroup;
import java.util.Objects;
import org.jspecify.annotations.Nullable;

/**
 * A router event about a secondary KV cache group of a hybrid model (docs/routing.md, "Hybrid
 * models"): every group but the main one, whose events stay ordinary {@link TieredEvent}s. Always
 * about the device tier.
 *
 * <p>Its block hashes are the router's §2 sequence hashes of the positions (DESIGN.md §2), not the
 * engine's hashes: a {@code Stored} names the positions the group now holds (a set, not a chain:
 * its parent is not used), a {@code Removed} the positions it evicted, a {@code Cleared} empties
 * the group for the event's rank.
 *
 * @param groupIdx the engine's group index ({@code group_idx})
 * @param group the group's kind as its stores declare it; null on a removal or clear of a group
 *     whose kind no store has named yet
 * @param event the event, for the rank of the batch
 */
public record GroupEvent(int groupIdx, @Nullable KvCacheGroup group, RouterEvent event) {
  public GroupEvent {
    if (groupIdx < 0) {
      throw new IllegalArgumentException("groupIdx must be >= 0, got " + groupIdx);
    }
    Objects.requireNonNull(event, "event");
    if (group == null && event.data() instanceof CacheEvent.Stored) {
      throw new IllegalArgumentException("a group store names the group's kind");
    }
  }
}
