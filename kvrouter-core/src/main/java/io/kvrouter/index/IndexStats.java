package io.kvrouter.index;

/**
 * Counters of an index: events applied by type and outcome, and what the index holds now.
 *
 * @param storedEvents {@code Stored} events applied
 * @param removedEvents {@code Removed} events applied
 * @param clearedEvents {@code Cleared} events applied
 * @param parentMissing {@code Stored} events rejected whole because the worker did not hold the
 *     parent
 * @param blocksMissing blocks of {@code Removed} events that the worker did not hold (skipped)
 * @param blocksIndexed (worker rank, block) pairs held now
 * @param workers worker ranks known now
 * @param evictedBlocks (worker rank, block) pairs dropped to keep a bounded index within its {@code
 *     maxBlocks} (always 0 for an unbounded one)
 */
public record IndexStats(
    long storedEvents,
    long removedEvents,
    long clearedEvents,
    long parentMissing,
    long blocksMissing,
    long blocksIndexed,
    int workers,
    long evictedBlocks) {

  /** The field-wise sum, for indexes made of parts. */
  public IndexStats plus(IndexStats o) {
    return new IndexStats(
        storedEvents + o.storedEvents,
        removedEvents + o.removedEvents,
        clearedEvents + o.clearedEvents,
        parentMissing + o.parentMissing,
        blocksMissing + o.blocksMissing,
        blocksIndexed + o.blocksIndexed,
        workers + o.workers,
        evictedBlocks + o.evictedBlocks);
  }
}
