package io.kvrouter.transport.kvevents;

import java.util.List;
import java.util.Objects;

/**
 * What {@link EngineEventConverter#convert} made of one batch.
 *
 * @param events the router events to apply, in order
 * @param ignoredEvents engine events left out because they describe a secondary KV cache group of a
 *     hybrid model (a {@code group_idx} other than 0, or a {@code kv_cache_spec_kind} that is not
 *     full or MLA attention)
 * @param refusedEvents {@code BlockStored} events refused because their {@code block_size} is not
 *     the engine block size registered for the source
 * @param droppedBlocks engine blocks of {@code BlockStored} events left out because {@code
 *     token_ids} did not hold all of their tokens (a partial block is never indexed)
 * @param placeholderEvents off-device {@code BlockStored} events without token ids (vLLM's
 *     OffloadingConnector without {@code self_describing_kv_events}): the router cannot hash their
 *     blocks, so they are left out
 * @param dropReason why the whole batch was dropped, or {@code null} when it was not; a dropped
 *     batch has no events and changed no converter state
 */
public record ConvertedBatch(
    List<TieredEvent> events,
    int ignoredEvents,
    int refusedEvents,
    int droppedBlocks,
    int placeholderEvents,
    String dropReason) {
  public ConvertedBatch {
    events = List.copyOf(Objects.requireNonNull(events, "events"));
  }

  /** Whether the whole batch was dropped. */
  public boolean dropped() {
    return dropReason != null;
  }

  static ConvertedBatch drop(String reason) {
    return new ConvertedBatch(List.of(), 0, 0, 0, 0, reason);
  }
}
