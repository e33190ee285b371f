package io.kvrouter.route;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.event.Worker;
import io.kvrouter.hash.SequenceHasher;
import io.kvrouter.index.KvIndex;
import io.kvrouter.index.KvIndexes;
import io.kvrouter.route.SequenceChange.Predicted;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The model a snapshot carries: chains, capped in hashes, newest kept. */
class PredictedBlocksSnapshotTest {
  private static final Worker W = new Worker(1, 0);

  @Test
  void chainsThroughASharedPrefixAreCappedAtFourTimesTheBoundNewestFirst() {
    try (KvIndex index = KvIndexes.concurrentRadixTree()) {
      // 16 entries: 7 shared blocks and 9 one-block suffixes; the 9 chains repeat the prefix
      PredictedBlocks model =
          new PredictedBlocks(index, Duration.ofHours(1), 16, (rank, blocks, now) -> {});
      for (int i = 0; i < 9; i++) {
        long[] local = {1, 2, 3, 4, 5, 6, 7, 100 + i};
        model.record(W, 0, SequenceHasher.sequenceHashes(local), local, i == 0 ? 0 : 7, i + 1);
      }
      List<Predicted> chains = model.chains(100);
      long hashes = chains.stream().mapToLong(c -> c.localHashes().length).sum();
      // without the cap: 9 chains of 8 = 72 hashes; with it at most 4 x 16 = 64
      assertThat(hashes).isLessThanOrEqualTo(64);
      assertThat(chains).hasSize(8);
      // the oldest chain is the one left out; the rest oldest first, as load() takes them
      assertThat(chains)
          .extracting(c -> c.localHashes()[7])
          .containsExactly(101L, 102L, 103L, 104L, 105L, 106L, 107L, 108L);
    }
  }
}
