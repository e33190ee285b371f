package io.kvrouter.index;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import io.kvrouter.hash.SequenceHasher;
import java.util.Arrays;
import java.util.List;
import java.util.function.Supplier;
import org.junit.jupiter.api.Test;

/**
 * A store that re-uses a hash the worker already gave another block ("the newer store wins") must
 * not lose the block it stores, in every kind, even when un-naming the old block leaves the new
 * block's node unused for a moment.
 */
class RenamedBlockTest {
  private static final Worker W = new Worker(0, 0);

  private static void check(List<CacheEvent> events, long[]... queries) {
    for (Supplier<KvIndex> kind : IndexKinds.suppliers()) {
      ReferenceIndex ref = new ReferenceIndex();
      try (KvIndex index = kind.get()) {
        long id = 0;
        for (CacheEvent e : events) {
          RouterEvent re = new RouterEvent(W, id++, e);
          index.apply(re);
          ref.apply(re);
        }
        index.flush();
        for (long[] q : queries) {
          assertThat(index.findMatches(q, false).scores())
              .as("%s on %s", index, Arrays.toString(q))
              .isEqualTo(ref.scores(q));
        }
        assertThat(index.stats().blocksIndexed()).as("%s", index).isEqualTo(ref.blockCount(W));
      }
    }
  }

  @Test
  void renamingADetachedChildOntoItsUnheldParentKeepsTheParent() {
    // [3, 4] stored, then 3 removed: 4 is held behind a hole and 3's node is unheld but not
    // unused. Storing 3 again under 4's hash un-names 4, which leaves 3's node unused just before
    // it is named again.
    long[] seq = SequenceHasher.sequenceHashes(new long[] {3, 4});
    check(
        List.of(
            CacheEvent.storedAtRoot(seq, new long[] {3, 4}),
            CacheEvent.removed(seq[0]),
            CacheEvent.storedAtRoot(new long[] {seq[1]}, new long[] {3})),
        new long[] {3, 4},
        new long[] {3});
  }

  @Test
  void renamingADeeperDetachedBlockOntoAnUnheldChain() {
    long[] path = {3, 4, 5, 6};
    long[] seq = SequenceHasher.sequenceHashes(path);
    check(
        List.of(
            CacheEvent.storedAtRoot(seq, path),
            CacheEvent.removed(seq[1], seq[0]),
            CacheEvent.storedAtRoot(new long[] {seq[3], seq[2]}, new long[] {3, 4})),
        path,
        new long[] {3, 4},
        new long[] {3});
  }
}
