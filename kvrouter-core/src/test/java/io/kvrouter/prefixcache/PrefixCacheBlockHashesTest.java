package io.kvrouter.prefixcache;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.event.Worker;
import io.kvrouter.hash.BlockHasher;
import io.kvrouter.hash.SequenceHasher;
import org.junit.jupiter.api.Test;

/** {@link PrefixCache#blockHashes()} lists exactly the sequence hashes of the cached blocks. */
class PrefixCacheBlockHashesTest {

  @Test
  void listsTheCachedBlocksThroughStoresEvictionsAndClears() {
    PrefixCache c = new PrefixCache(new Worker(1, 0), 2, 4, e -> {});
    BlockHasher h = BlockHasher.of(2);
    assertThat(c.blockHashes()).isEmpty();

    int[] a = {1, 2, 3, 4, 5};
    c.admit(1, a);
    long[] seqA = SequenceHasher.sequenceHashes(h.localHashes(a));
    assertThat(c.blockHashes()).containsExactlyInAnyOrder(seqA);

    int[] b = {1, 2, 7, 8};
    c.admit(2, b);
    long[] seqB = SequenceHasher.sequenceHashes(h.localHashes(b));
    assertThat(c.blockHashes()).containsExactlyInAnyOrder(seqA[0], seqA[1], seqB[1]);

    c.release(1);
    c.release(2);
    int[] d = {9, 9, 8, 8, 7, 7}; // three new blocks in a pool of four: evicts two
    c.admit(3, d);
    long[] seqD = SequenceHasher.sequenceHashes(h.localHashes(d));
    assertThat(c.blockHashes()).hasSize(c.cachedBlocks()).contains(seqD);

    c.clear();
    assertThat(c.blockHashes()).isEmpty();
  }
}
