package io.kvrouter.index;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * The shared conformance suite on {@link KvIndexes#positional(int)} with jump size 32, plus what
 * only the positional index can get wrong: probes that land on matching slots past a difference
 * (DESIGN.md §4 rule 8), several workers dropping out inside one jump window, engines whose hashes
 * do not follow §2. Subclassed for other jump sizes.
 *
 * <p>Every inherited test runs unmodified, including {@code
 * twoWorkersMayNameTheSameContentWithDifferentHashes}: this index finds a stored block by the
 * router's own §2 hash of its path, derived from the parent block's entry, and uses the engine's
 * hash only as the block's name, so a worker whose engine hashes differ from §2 is scored exactly
 * (rule 8 would allow an undercount past position 0; this index does not need it).
 */
class PositionalConformanceTest extends KvIndexConformanceTest {
  private long nextEventId = 1_000_000;

  /** The jump size under test. */
  protected int jumpSize() {
    return 32;
  }

  @Override
  protected KvIndex newIndex() {
    return KvIndexes.positional(jumpSize());
  }

  private void apply(Worker worker, CacheEvent data) {
    index.apply(new RouterEvent(worker, nextEventId++, data));
  }

  @Test
  void jumpSizeMustBePositive() {
    assertThatThrownBy(() -> KvIndexes.positional(0)).isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> KvIndexes.positional(-3)).isInstanceOf(IllegalArgumentException.class);
    assertThat(((PackedPositionalIndex) KvIndexes.positional(5)).jumpSize()).isEqualTo(5);
  }

  @Test
  void threadPoolAcceptsThePositionalIndex() {
    try {
      KvIndexes.threadPool(index, 1).close();
    } catch (UnsupportedOperationException notBuiltYet) {
      // the pool itself is someone else's; what matters is that it is no IllegalArgumentException
    }
  }

  @Test
  void aMatchingSlotPastADifferenceDoesNotCount() {
    // worker 1 holds the same local hash as worker 0 at every probed position, but its path
    // differs at position 1: a probe that trusted (position, local) alone would over-count it
    long[] chain = range(1, 200);
    long[] other = chain.clone();
    other[1] = 77_777;
    store(w(0), chain);
    store(w(1), other);
    assertThat(match(chain)).isEqualTo(Map.of(w(0), 200, w(1), 1));
    assertThat(match(other)).isEqualTo(Map.of(w(0), 1, w(1), 200));
    // a difference right before a probe position and right after one
    for (int at : new int[] {jumpSize() - 1, jumpSize(), jumpSize() + 1, 2 * jumpSize() - 1}) {
      if (at >= chain.length) continue;
      long[] q = chain.clone();
      q[at] = -1;
      assertThat(match(q)).as("differing at %d", at).isEqualTo(expected(at, Math.min(at, 1)));
    }
  }

  private static Map<Worker, Integer> expected(int w0, int w1) {
    Map<Worker, Integer> m = new HashMap<>();
    if (w0 > 0) m.put(w(0), w0);
    if (w1 > 0) m.put(w(1), w1);
    return m;
  }

  @Test
  void everyWorkerDropsOutAtItsOwnPositionInsideOneWindow() {
    int n = 2 * jumpSize() + 3;
    for (int i = 0; i < n; i++) store(w(i), range(1, i + 1));
    Map<Worker, Integer> got = match(range(1, n + 5));
    assertThat(got).hasSize(n);
    for (int i = 0; i < n; i++) assertThat(got.get(w(i))).as("worker %d", i).isEqualTo(i + 1);
  }

  @Test
  void holesAtEveryOffsetOfAWindow() {
    int len = 3 * jumpSize() + 2;
    long[] chain = range(10, len);
    for (int hole = 0; hole < len; hole++) store(w(hole), chain);
    for (int hole = 0; hole < len; hole++) remove(w(hole), Arrays.copyOf(chain, hole + 1));
    Map<Worker, Integer> got = match(chain);
    for (int hole = 0; hole < len; hole++) {
      assertThat(got.getOrDefault(w(hole), 0)).as("hole at %d", hole).isEqualTo(hole);
    }
    // filling every hole back reconnects everything
    for (int hole = 1; hole < len; hole++) {
      storeUnder(w(hole), Arrays.copyOf(chain, hole), chain[hole]);
    }
    store(w(0), chain[0]);
    got = match(chain);
    for (int hole = 0; hole < len; hole++) assertThat(got.get(w(hole))).isEqualTo(len);
  }

  @Test
  void anEngineThatDoesNotFollowSection2IsScoredExactly() {
    int len = 3 * jumpSize() + 5;
    long[] chain = range(1, len);
    long[] engineHashes = new long[len];
    for (int i = 0; i < len; i++) engineHashes[i] = 900_000L + i; // not §2
    apply(w(1), CacheEvent.storedAtRoot(engineHashes, chain.clone()));
    store(w(0), Arrays.copyOf(chain, 3));
    assertThat(match(chain)).isEqualTo(Map.of(w(0), 3, w(1), len));
    // a hole named by the engine's own hash
    apply(w(1), CacheEvent.removed(engineHashes[jumpSize()]));
    assertThat(match(chain)).isEqualTo(Map.of(w(0), 3, w(1), jumpSize()));
    // re-stored under the engine's own parent hash: reconnected
    apply(
        w(1),
        CacheEvent.stored(
            engineHashes[jumpSize() - 1],
            new long[] {engineHashes[jumpSize()]},
            new long[] {chain[jumpSize()]}));
    assertThat(match(chain)).isEqualTo(Map.of(w(0), 3, w(1), len));
    // the dump replays into every kind with the same answers
    for (KvIndex other : IndexKinds.all()) {
      try (other) {
        index.dump().forEach(other::apply);
        other.flush();
        assertThat(other.findMatches(chain, false).scores())
            .as("%s", other)
            .isEqualTo(match(chain));
      }
    }
  }

  @Test
  void earlyExitStopsWithTheLastWorkerAtLeastWhereItWasAlone() {
    int len = 4 * jumpSize() + 1;
    store(w(0), range(1, len));
    store(w(1), range(1, 5));
    store(w(2), range(1, jumpSize() + 2));
    index.flush();
    OverlapScores s = index.findMatches(range(1, len), true);
    assertThat(s.score(w(1))).isEqualTo(5);
    assertThat(s.score(w(2))).isEqualTo(jumpSize() + 2);
    assertThat(s.score(w(0))).isBetween(jumpSize() + 2, len);
    assertThat(index.findMatches(range(1, len), false).score(w(0))).isEqualTo(len);
  }

  @Test
  void aliasesKeepABlockHeldUntilItsLastName() {
    store(w(0), 1, 2, 3);
    apply(w(0), CacheEvent.storedAtRoot(new long[] {61, 62}, new long[] {1, 2}));
    index.flush();
    assertThat(index.stats().blocksIndexed()).isEqualTo(3);
    remove(w(0), 1, 2); // one name of block [1, 2]: still held
    assertThat(match(1, 2, 3)).isEqualTo(Map.of(w(0), 3));
    apply(w(0), CacheEvent.removed(62)); // the last name
    assertThat(match(1, 2, 3)).isEqualTo(Map.of(w(0), 1));
    apply(w(0), CacheEvent.stored(61, new long[] {62}, new long[] {2}));
    assertThat(match(1, 2, 3)).isEqualTo(Map.of(w(0), 3));
  }

  @Test
  void anEngineHashReusedForAnotherBlockMovesTheName() {
    store(w(0), range(1, 40));
    long[] s = seqs(range(1, 40));
    // the engine names a new block [1, 2'] with the hash it used for [1, 2, 3]
    apply(w(0), CacheEvent.stored(s[0], new long[] {s[2]}, new long[] {555}));
    assertThat(match(range(1, 40))).isEqualTo(Map.of(w(0), 2));
    assertThat(match(1, 555)).isEqualTo(Map.of(w(0), 2));
    // a chain that re-uses its own parent's hash: the parent is no longer held, so the child
    // behind it does not count
    apply(w(1), CacheEvent.storedAtRoot(new long[] {5, 5}, new long[] {8, 9}));
    assertThat(match(8, 9)).isEmpty();
    // storing the parent again under a new hash reconnects the child, which must therefore still
    // hang under the parent's entry (the parent was unheld for a moment inside that store)
    apply(w(1), CacheEvent.storedAtRoot(new long[] {6}, new long[] {8}));
    assertThat(match(8, 9)).isEqualTo(Map.of(w(1), 2));
    // the same one level down, where a probe past position 1 would see the child if it had been
    // counted as connected
    apply(w(2), CacheEvent.storedAtRoot(new long[] {4, 6, 6}, new long[] {8, 9, 10}));
    assertThat(match(8, 9, 10)).isEqualTo(Map.of(w(1), 2, w(2), 1));
    index.flush();
    assertThat(index.stats().blocksIndexed()).isEqualTo(40 + 2 + 2);
  }

  @Test
  void prunedEntriesLeaveTheTable() {
    PackedPositionalIndex p = (PackedPositionalIndex) index;
    store(w(0), range(1, 100));
    store(w(1), range(1, 50));
    assertThat(IndexProbe.entryCount(p)).isEqualTo(100);
    remove(w(0), range(1, 100));
    assertThat(IndexProbe.entryCount(p)).isEqualTo(99);
    remove(w(0), range(1, 60));
    assertThat(IndexProbe.entryCount(p)).isEqualTo(99); // held behind the hole
    cleared(w(0));
    assertThat(IndexProbe.entryCount(p)).isEqualTo(50);
    index.removeWorker(1);
    assertThat(IndexProbe.entryCount(p)).isZero();
    assertThat(match(range(1, 100))).isEmpty();
  }

  @Test
  void manyBlocksGrowAndShrinkTheTable() {
    PackedPositionalIndex p = (PackedPositionalIndex) index;
    for (int w = 0; w < 8; w++) store(w(w), range(1_000_000L * w, 2_000));
    assertThat(IndexProbe.entryCount(p)).isEqualTo(16_000);
    for (int w = 0; w < 8; w++) {
      assertThat(match(range(1_000_000L * w, 2_100))).isEqualTo(Map.of(w(w), 2_000));
    }
    for (int w = 0; w < 7; w++) index.clearWorker(w);
    store(w(0), 1, 2, 3); // an insert rebuilds the table without the tombstones
    assertThat(IndexProbe.entryCount(p)).isEqualTo(2_003);
    assertThat(match(range(7_000_000L, 2_000))).isEqualTo(Map.of(w(7), 2_000));
  }

  @Test
  void theTableShrinksBackOnceItsEntriesAreRemoved() {
    PackedPositionalIndex p = (PackedPositionalIndex) index;
    Worker w = w(1);
    for (long l = 1; l <= 5_000; l++) store(w, l);
    assertThat(IndexProbe.tableCapacity(p)).isGreaterThan(5_000 * 4 / 3); // at most 3/4 full
    for (long l = 1; l <= 5_000; l++) remove(w, l);
    assertThat(IndexProbe.entryCount(p)).isZero();
    assertThat(IndexProbe.tableCapacity(p)).isEqualTo(PackedTable.MIN_CAPACITY);
    store(w, 7, 8);
    assertThat(match(7, 8, 9)).containsEntry(w, 2);
  }
}
