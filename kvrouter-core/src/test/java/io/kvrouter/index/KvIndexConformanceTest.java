package io.kvrouter.index;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import io.kvrouter.hash.SequenceHasher;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The behaviour every index kind shares (DESIGN.md §4), including Dynamo's published scenarios.
 * Subclassed once per kind.
 */
abstract class KvIndexConformanceTest {
  protected KvIndex index;
  private long eventId;

  /** A fresh, empty index of the kind under test. */
  protected abstract KvIndex newIndex();

  @BeforeEach
  void setUp() {
    index = newIndex();
  }

  @AfterEach
  void tearDown() {
    index.close();
  }

  // ---------------------------------------------------------------- helpers

  static Worker w(long id) {
    return new Worker(id, 0);
  }

  /** Local hashes used as their own "tokens": chain [a, b, c] has local hashes a, b, c. */
  static long[] locals(long... l) {
    return l;
  }

  /** The §2 sequence hashes of a chain of local hashes from the root. */
  static long[] seqs(long... locals) {
    return SequenceHasher.sequenceHashes(locals);
  }

  /** Stores the chain {@code locals} at the root for {@code worker}, with §2 sequence hashes. */
  void store(Worker worker, long... locals) {
    index.apply(new RouterEvent(worker, eventId++, CacheEvent.storedAtRoot(seqs(locals), locals)));
  }

  /** Stores {@code tail} under the block of {@code worker} reached by {@code prefix}. */
  void storeUnder(Worker worker, long[] prefix, long... tail) {
    long[] all = concat(prefix, tail);
    long[] s = seqs(all);
    long[] tailSeqs = Arrays.copyOfRange(s, prefix.length, all.length);
    index.apply(
        new RouterEvent(
            worker, eventId++, CacheEvent.stored(s[prefix.length - 1], tailSeqs, tail.clone())));
  }

  /** Removes the block at {@code path} (by its §2 sequence hash). */
  void remove(Worker worker, long... path) {
    long[] s = seqs(path);
    index.apply(new RouterEvent(worker, eventId++, CacheEvent.removed(s[s.length - 1])));
  }

  void cleared(Worker worker) {
    index.apply(new RouterEvent(worker, eventId++, CacheEvent.cleared()));
  }

  Map<Worker, Integer> match(long... query) {
    index.flush();
    return index.findMatches(query, false).scores();
  }

  static long[] concat(long[] a, long[] b) {
    long[] out = Arrays.copyOf(a, a.length + b.length);
    System.arraycopy(b, 0, out, a.length, b.length);
    return out;
  }

  static long[] range(long from, int n) {
    long[] out = new long[n];
    for (int i = 0; i < n; i++) out[i] = from + i;
    return out;
  }

  // ---------------------------------------------------------------- Dynamo's scenarios

  @Test
  void twoWorkersSharingAPrefix() {
    store(w(0), 1, 2, 3);
    store(w(1), 1, 4, 5);
    assertThat(match(1, 2, 3)).isEqualTo(Map.of(w(0), 3, w(1), 1));
    assertThat(match(1, 4, 5, 6)).isEqualTo(Map.of(w(0), 1, w(1), 3));
    assertThat(match(2, 3)).isEmpty();
    assertThat(match()).isEmpty();
  }

  @Test
  void removeAndReStoreUnderAParent() {
    store(w(0), 1, 2, 3);
    remove(w(0), 1, 2, 3);
    assertThat(match(1, 2, 3)).isEqualTo(Map.of(w(0), 2));
    storeUnder(w(0), locals(1, 2), 3);
    assertThat(match(1, 2, 3)).isEqualTo(Map.of(w(0), 3));
    storeUnder(w(0), locals(1, 2, 3), 4, 5);
    assertThat(match(1, 2, 3, 4, 5, 6)).isEqualTo(Map.of(w(0), 5));
  }

  /**
   * One Removed event naming part of a chain in any order (top first, as kvrouter's PrefixCache
   * lists an evicted leaf; deepest first, as vLLM evicts; or mixed), with a block the worker keeps
   * below it and another worker's blocks on the same path: the same end state every time.
   */
  @ParameterizedTest(name = "order {0}")
  @ValueSource(strings = {"1,2,3", "3,2,1", "2,1,3", "1,3,2", "3,1,2"})
  void removingPartOfAChainInOneEventInAnyOrder(String order) {
    store(w(0), 1, 2, 3, 4, 5);
    store(w(1), 1, 2, 3, 4, 6);
    long[] s = seqs(1, 2, 3, 4, 5);
    long[] middle =
        Arrays.stream(order.split(",")).mapToLong(k -> s[Integer.parseInt(k)]).toArray();
    index.apply(new RouterEvent(w(0), eventId++, CacheEvent.removed(middle)));
    // w0 keeps blocks 1 and 5; block 5 is behind a hole and scores nothing
    assertThat(match(1, 2, 3, 4, 5)).isEqualTo(Map.of(w(0), 1, w(1), 4));
    assertThat(index.stats().blocksIndexed()).isEqualTo(2 + 5);
    // the hole filled again: block 5 counts once more
    storeUnder(w(0), locals(1), 2, 3, 4);
    assertThat(match(1, 2, 3, 4, 5)).isEqualTo(Map.of(w(0), 5, w(1), 4));
    assertThat(index.stats().blocksMissing()).isZero();
  }

  /**
   * One Removed event naming two evicted leaves and their common parent chain, the parent's run
   * listed after a child's (as an eviction that pops a leaf and then its parent lists them), in
   * several orders: nothing of the worker is left and the other worker keeps its blocks.
   */
  @ParameterizedTest(name = "order {0}")
  @ValueSource(strings = {"2,3,4,0,1", "4,2,3,0,1", "0,1,2,3,4", "1,0,3,2,4", "4,3,2,1,0"})
  void removingTwoLeavesAndTheirParentInOneEventInAnyOrder(String order) {
    // w0: a1 -> a2 -> {b1 -> b2, c1}; w1 holds a1 -> a2 -> b1
    store(w(0), 1, 2, 3, 4);
    storeUnder(w(0), locals(1, 2), 5);
    store(w(1), 1, 2, 3);
    long[] b = seqs(1, 2, 3, 4);
    long[] names = {b[0], b[1], b[2], b[3], seqs(1, 2, 5)[2]};
    long[] listed =
        Arrays.stream(order.split(",")).mapToLong(k -> names[Integer.parseInt(k)]).toArray();
    index.apply(new RouterEvent(w(0), eventId++, CacheEvent.removed(listed)));
    assertThat(match(1, 2, 3, 4)).isEqualTo(Map.of(w(1), 3));
    assertThat(match(1, 2, 5)).isEqualTo(Map.of(w(1), 2));
    assertThat(index.stats().blocksIndexed()).isEqualTo(3);
    assertThat(index.stats().blocksMissing()).isZero();
    store(w(0), 1, 2, 5);
    assertThat(match(1, 2, 5)).isEqualTo(Map.of(w(0), 3, w(1), 2));
  }

  @Test
  void clearingOneWorkerLeavesTheOthers() {
    store(w(0), 1, 2, 3);
    store(w(1), 1, 2, 3);
    index.clearWorker(0);
    assertThat(match(1, 2, 3)).isEqualTo(Map.of(w(1), 3));
    store(w(0), 1, 2);
    assertThat(match(1, 2, 3)).isEqualTo(Map.of(w(0), 2, w(1), 3));
  }

  @Test
  void earlyExitKeepsTheLastWorkerAtLeastWhereItWasAlone() {
    store(w(0), 0, 1, 2);
    store(w(1), 0);
    index.flush();
    OverlapScores s = index.findMatches(locals(0, 1, 2), true);
    assertThat(s.score(w(1))).isEqualTo(1);
    assertThat(s.score(w(0))).isBetween(1, 3);
    assertThat(index.findMatches(locals(0, 1, 2), false).scores())
        .isEqualTo(Map.of(w(0), 3, w(1), 1));
  }

  @ParameterizedTest
  @ValueSource(ints = {1, 2, 31, 32, 33, 63, 64, 65, 96, 97, 128})
  void storedLengthsAroundJumpBoundariesMatchExactly(int length) {
    long[] chain = range(1000, length);
    store(w(0), chain);
    assertThat(match(range(1000, length + 10))).isEqualTo(Map.of(w(0), length));
    assertThat(match(chain)).isEqualTo(Map.of(w(0), length));
  }

  @ParameterizedTest
  @ValueSource(ints = {1, 31, 32, 33, 63, 64, 65, 95, 96, 97})
  void divergenceScoresExactlyItsPosition(int at) {
    long[] chain = range(1, 128);
    store(w(0), chain);
    long[] query = chain.clone();
    query[at] = 999_999;
    assertThat(match(query)).isEqualTo(Map.of(w(0), at));
  }

  @Test
  void aLongSequenceDivergingAt499Scores499() {
    long[] chain = range(1, 1000);
    store(w(0), chain);
    long[] query = chain.clone();
    query[499] = -7;
    assertThat(match(query)).isEqualTo(Map.of(w(0), 499));
    assertThat(match(chain)).isEqualTo(Map.of(w(0), 1000));
  }

  @Test
  void staggeredWorkersEachScoreTheirOwnLength() {
    int[] lengths = {10, 20, 35, 64, 100};
    for (int i = 0; i < lengths.length; i++) store(w(i), range(1, lengths[i]));
    Map<Worker, Integer> got = match(range(1, 100));
    for (int i = 0; i < lengths.length; i++) assertThat(got.get(w(i))).isEqualTo(lengths[i]);
    assertThat(got).hasSize(lengths.length);
  }

  // ---------------------------------------------------------------- DESIGN.md §4 rules

  @Test
  void aHoleStopsTheScore() {
    store(w(0), 1, 2, 3, 4, 5);
    store(w(1), 1, 2, 3, 4, 5);
    remove(w(0), 1, 2, 3);
    assertThat(match(1, 2, 3, 4, 5)).isEqualTo(Map.of(w(0), 2, w(1), 5));
    assertThat(index.stats().blocksIndexed()).isEqualTo(9);
  }

  @Test
  void reStoringTheMissingParentReconnectsTheDescendants() {
    store(w(0), 1, 2, 3, 4, 5);
    remove(w(0), 1, 2);
    assertThat(match(1, 2, 3, 4, 5)).isEqualTo(Map.of(w(0), 1));
    storeUnder(w(0), locals(1), 2);
    assertThat(match(1, 2, 3, 4, 5)).isEqualTo(Map.of(w(0), 5));
  }

  @Test
  void aStoreBelowAHoleCountsOnceTheHoleIsFilled() {
    store(w(0), 1, 2, 3);
    remove(w(0), 1, 2);
    storeUnder(w(0), locals(1, 2, 3), 4); // parent 3 is still held, behind the hole
    assertThat(match(1, 2, 3, 4)).isEqualTo(Map.of(w(0), 1));
    storeUnder(w(0), locals(1), 2);
    assertThat(match(1, 2, 3, 4)).isEqualTo(Map.of(w(0), 4));
  }

  @Test
  void aStoreUnderAnUnknownParentIsRejectedWhole() {
    store(w(0), 1, 2);
    index.apply(
        new RouterEvent(w(0), 99, CacheEvent.stored(12345L, new long[] {7, 8}, new long[] {3, 4})));
    assertThat(match(1, 2, 3, 4)).isEqualTo(Map.of(w(0), 2));
    // the parent of another worker does not count either
    storeUnder(w(1), locals(1, 2), 3);
    index.flush();
    assertThat(match(1, 2, 3)).isEqualTo(Map.of(w(0), 2));
    assertThat(index.stats().parentMissing()).isEqualTo(2);
    assertThat(index.stats().blocksIndexed()).isEqualTo(2);
  }

  @Test
  void storingTwiceIsIdempotent() {
    store(w(0), 1, 2, 3);
    store(w(0), 1, 2, 3);
    storeUnder(w(0), locals(1), 2, 3);
    assertThat(match(1, 2, 3)).isEqualTo(Map.of(w(0), 3));
    index.flush();
    assertThat(index.stats().blocksIndexed()).isEqualTo(3);
    assertThat(index.findMatches(locals(1), false).blockCount(w(0))).isEqualTo(3);
    remove(w(0), 1, 2, 3);
    assertThat(match(1, 2, 3)).isEqualTo(Map.of(w(0), 2));
  }

  @Test
  void twoWorkersMayNameTheSameContentWithDifferentHashes() {
    store(w(0), 1, 2);
    // worker 1 stores the same local hashes under its own sequence hashes
    index.apply(
        new RouterEvent(
            w(1), 1, CacheEvent.storedAtRoot(new long[] {501, 502}, new long[] {1, 2})));
    index.apply(new RouterEvent(w(1), 2, CacheEvent.stored(502, new long[] {503}, new long[] {3})));
    assertThat(match(1, 2, 3)).isEqualTo(Map.of(w(0), 2, w(1), 3));
    index.apply(new RouterEvent(w(1), 3, CacheEvent.removed(502)));
    assertThat(match(1, 2, 3)).isEqualTo(Map.of(w(0), 2, w(1), 1));
    // worker 0's hash does not name worker 1's block
    index.apply(new RouterEvent(w(1), 4, CacheEvent.removed(seqs(1)[0])));
    assertThat(match(1, 2, 3)).isEqualTo(Map.of(w(0), 2, w(1), 1));
  }

  @Test
  void removingUnknownBlocksSkipsThemAndGoesOn() {
    store(w(0), 1, 2, 3);
    long[] s = seqs(1, 2, 3);
    index.apply(new RouterEvent(w(0), 10, CacheEvent.removed(424242L, s[2], 777L)));
    index.apply(new RouterEvent(w(5), 11, CacheEvent.removed(s[0]))); // unknown worker
    assertThat(match(1, 2, 3)).isEqualTo(Map.of(w(0), 2));
    index.flush();
    assertThat(index.stats().blocksMissing()).isEqualTo(3);
  }

  @Test
  void clearedDropsOneRankOnly() {
    Worker r0 = new Worker(7, 0);
    Worker r1 = new Worker(7, 1);
    store(r0, 1, 2);
    store(r1, 1, 2, 3);
    cleared(r1);
    assertThat(match(1, 2, 3)).isEqualTo(Map.of(r0, 2));
    store(r1, 1);
    assertThat(match(1, 2, 3)).isEqualTo(Map.of(r0, 2, r1, 1));
    index.clearWorker(7);
    assertThat(match(1, 2, 3)).isEmpty();
  }

  @Test
  void dpRanksAreKeptApart() {
    Worker r0 = new Worker(3, 0);
    Worker r1 = new Worker(3, 1);
    store(r0, 1, 2, 3);
    store(r1, 1, 9);
    remove(r1, 1);
    assertThat(match(1, 2, 3)).isEqualTo(Map.of(r0, 3));
    assertThat(match(1, 9)).isEqualTo(Map.of(r0, 1));
    // rank 1 cannot use rank 0's parent
    storeUnder(r1, locals(1, 2), 3);
    assertThat(match(1, 2, 3)).isEqualTo(Map.of(r0, 3));
  }

  @Test
  void removeWorkerForgetsEveryRank() {
    store(new Worker(4, 0), 1, 2);
    store(new Worker(4, 1), 1, 2);
    store(w(5), 1);
    index.removeWorker(4);
    assertThat(match(1, 2)).isEqualTo(Map.of(w(5), 1));
    index.flush();
    assertThat(index.stats().workers()).isEqualTo(1);
    assertThat(index.dump()).allMatch(e -> e.worker().workerId() == 5);
  }

  @Test
  void workerIdsNamesEveryKnownWorkerOnceAscendingUntilRemoved() {
    assertThat(index.workerIds()).isEmpty();
    store(new Worker(9, 1), 1, 2);
    store(new Worker(9, 0), 1);
    store(w(3), 5);
    cleared(w(6)); // known, with no block
    store(w(4), 7);
    cleared(w(4)); // had blocks, now none: still known
    index.clearWorker(3); // still known
    assertThat(index.workerIds()).containsExactly(3L, 4L, 6L, 9L);
    index.removeWorker(9);
    index.removeWorker(6);
    assertThat(index.workerIds()).containsExactly(3L, 4L);
    store(new Worker(9, 2), 8); // a removed worker that comes back is known again
    assertThat(index.workerIds()).containsExactly(3L, 4L, 9L);
  }

  @Test
  void blockCountCountsDistinctBlocks() {
    store(w(0), 1, 2, 3);
    store(w(0), 7);
    store(w(1), 1);
    index.flush();
    OverlapScores s = index.findMatches(locals(1, 2), false);
    assertThat(s.blockCount(w(0))).isEqualTo(4);
    assertThat(s.blockCount(w(1))).isEqualTo(1);
    assertThat(s.blockCount(w(9))).isZero();
    assertThat(s.score(w(9))).isZero();
    assertThat(s.size()).isEqualTo(2);
  }

  @Test
  void blockCountOfARankNeedsNoQuery() {
    assertThat(index.blockCount(w(0))).isZero();
    store(w(0), 1, 2, 3);
    store(w(0), 7);
    store(w(0), 1, 2); // stored again: still distinct blocks
    store(new Worker(0, 1), 1);
    store(w(1), 4, 5);
    assertThat(index.blockCount(w(0))).isEqualTo(4);
    assertThat(index.blockCount(new Worker(0, 1))).isEqualTo(1);
    assertThat(index.blockCount(w(1))).isEqualTo(2);
    assertThat(index.blockCount(w(9))).isZero();
    remove(w(0), 1, 2, 3); // the chain's last block
    assertThat(index.blockCount(w(0))).isEqualTo(3);
    cleared(w(1));
    assertThat(index.blockCount(w(1))).isZero();
    index.removeWorker(0);
    assertThat(index.blockCount(w(0))).isZero();
    assertThat(index.blockCount(new Worker(0, 1))).isZero();
  }

  @Test
  void dumpReplaysToEqualAnswersInEveryKind() {
    store(w(0), 1, 2, 3, 4);
    store(w(1), 1, 2, 5);
    store(new Worker(1, 2), 1, 6);
    remove(w(0), 1, 2, 3);
    store(w(2), 9);
    cleared(w(2));
    index.flush();
    List<RouterEvent> dump = index.dump();
    long[][] queries = {
      locals(1, 2, 3, 4), locals(1, 2, 5), locals(1, 6), locals(9), locals(1, 2, 3), locals(7)
    };
    for (KvIndex other : IndexKinds.all()) {
      try (other) {
        dump.forEach(other::apply);
        other.flush();
        for (long[] q : queries) {
          assertThat(other.findMatches(q, false).scores())
              .as("%s on %s", other, Arrays.toString(q))
              .isEqualTo(index.findMatches(q, false).scores());
        }
      }
    }
  }

  @Test
  void countersSayWhatHappened() {
    store(w(0), 1, 2, 3);
    remove(w(0), 1, 2, 3);
    cleared(w(0));
    index.flush();
    IndexStats s = index.stats();
    assertThat(s.storedEvents()).isEqualTo(1);
    assertThat(s.removedEvents()).isEqualTo(1);
    assertThat(s.clearedEvents()).isEqualTo(1);
    assertThat(s.blocksIndexed()).isZero();
    assertThat(s.workers()).isEqualTo(1);
    assertThat(s.evictedBlocks()).isZero();
  }
}
