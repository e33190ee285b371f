package io.kvrouter.transport.kvevents;

import java.util.List;
import java.util.Objects;
import org.jspecify.annotations.Nullable;

/**
 * What {@link EngineEventConverter#convert} made of one batch.
 *
 * @param events the router events to apply, in order
 * @param ignoredEvents engine events of a KV cache group of a hybrid model left out: a group whose
 *     kind kvrouter does not score (chunked local attention, a sliding window without its window,
 *     unknown kinds, a group other than 0 without a kind), a group's copies off the device, or a
 *     group store whose parent that group does not hold
 * @param refusedEvents {@code BlockStored} events refused because their {@code block_size} is not
 *     the engine block size registered for the source (for a group of a hybrid model: not the main
 *     group's, or the router splits engine blocks)
 * @param droppedBlocks engine blocks of {@code BlockStored} events left out because {@code
 *     token_ids} did not hold all of their tokens (a partial block is never indexed)
 * @param placeholderEvents off-device {@code BlockStored} events without token ids (vLLM's
 *     OffloadingConnector without {@code self_describing_kv_events}): the router cannot hash their
 *     blocks, so they are left out
 * @param dropReason why the whole batch was dropped, or {@code null} when it was not; a dropped
 *     batch has no events and changed no converter state
 * @param groupEvents the events of the secondary KV cache groups of a hybrid model, in order; apply
 *     them after {@code events} (a group's {@code Cleared} comes in this list where the engine
 *     cleared, so the order within each list is all that matters)
 * @param groupProblem why the first group event left out or refused was, or {@code null}
 */
public record ConvertedBatch(
    List<TieredEvent> events,
    int ignoredEvents,
    int refusedEvents,
    int droppedBlocks,
    int placeholderEvents,
    @Nullable String dropReason,
    List<GroupEvent> groupEvents,
    @Nullable String groupProblem) {
  public ConvertedBatch {
    events = List.copyOf(Objects.requireNonNull(events, "events"));
    groupEvents = List.copyOf(Objects.requireNonNull(groupEvents, "groupEvents"));
  }

  /** A batch of a model that is not hybrid: no group events. */
  public ConvertedBatch(
      List<TieredEvent> events,
      int ignoredEvents,
      int refusedEvents,
      int droppedBlocks,
      int placeholderEvents,
      @Nullable String dropReason) {
    this(
        events,
        ignoredEvents,
        refusedEvents,
        droppedBlocks,
        placeholderEvents,
        dropReason,
        List.of(),
        null);
  }

  /** Whether the whole batch was dropped. */
  public boolean dropped() {
    return dropReason != null;
  }

  static ConvertedBatch drop(String reason) {
    return new ConvertedBatch(List.of(), 0, 0, 0, 0, reason);
  }
}
