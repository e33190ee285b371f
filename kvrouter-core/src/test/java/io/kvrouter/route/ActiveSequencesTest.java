package io.kvrouter.route;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.kvrouter.hash.SequenceHasher;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.LongConsumer;
import org.junit.jupiter.api.Test;

/** Load accounting per worker rank (DESIGN.md §6): blocks, prefill tokens, expiry. */
class ActiveSequencesTest {
  private static final long SECOND = 1_000_000_000L;

  private final AtomicLong clock = new AtomicLong(1_000 * SECOND);
  private final List<String> expired = new ArrayList<>();
  private final List<String> freed = new ArrayList<>();

  private ActiveSequences sequences(Duration expiry) {
    return new ActiveSequences(
        expiry,
        (id, seq, byExpiry) -> {
          if (byExpiry) expired.add(id);
          else freed.add(id);
        });
  }

  private ActiveSequences sequences() {
    return sequences(ActiveSequences.DEFAULT_EXPIRY);
  }

  /** Adds a request of {@code isl} tokens of which {@code overlap} blocks of 4 are cached, now. */
  private void add(ActiveSequences a, String id, long[] seq, int isl, int overlap) {
    a.add(id, seq, ActiveSequences.prefillTokens(isl, overlap, 4), clock.get());
  }

  private static void assertLoad(ActiveSequences a, int blocks, long tokens) {
    assertThat(a.activeBlocks()).as("active blocks").isEqualTo(blocks);
    assertThat(a.activePrefillTokens()).as("active prefill tokens").isEqualTo(tokens);
  }

  @Test
  void goldenWalkFromTheDesign() {
    ActiveSequences a = sequences();
    add(a, "r1", new long[] {1, 2, 3}, 12, 0);
    assertLoad(a, 3, 12);
    add(a, "r2", new long[] {4}, 4, 0);
    assertLoad(a, 4, 16);
    add(a, "r3", new long[] {1, 2, 3, 4}, 16, 4);
    assertLoad(a, 4, 16);
    assertThat(a.free("r2")).isTrue();
    assertLoad(a, 4, 12);
    assertThat(a.free("r3")).isTrue();
    assertLoad(a, 3, 12);
    assertThat(a.free("r1")).isTrue();
    assertLoad(a, 0, 0);
    assertThat(a.requestCount()).isZero();
  }

  @Test
  void newBlocksOfChainCountsTheBlocksNotHeld() {
    ActiveSequences a = sequences();
    long[] chain = SequenceHasher.sequenceHashes(new long[] {10, 20, 30, 40});
    assertThat(a.newBlocksOfChain(chain)).isEqualTo(4); // nothing active
    a.add("r1", Arrays.copyOf(chain, 3), 0, clock.get());
    assertThat(a.newBlocksOfChain(chain)).isEqualTo(1);
    assertThat(a.newBlocksOfChain(Arrays.copyOf(chain, 2))).isZero();
    assertThat(a.newBlocksOfChain(new long[0])).isZero();
    long[] other = SequenceHasher.sequenceHashes(new long[] {11, 20});
    assertThat(a.newBlocksOfChain(other)).isEqualTo(2);
    assertLoad(a, 3, 0); // asking changes nothing
  }

  /**
   * Not a chain of §2 hashes (the golden walk's arrays): block 4 is active at position 0 of [4], so
   * [1,2,3,4] brings no new block, though no chain in flight continues [1,2,3] with it.
   */
  @Test
  void aBlockActiveAtAnotherPositionIsNotNew() {
    ActiveSequences a = sequences();
    a.add("r1", new long[] {1, 2, 3}, 0, clock.get());
    a.add("r2", new long[] {4}, 0, clock.get());
    assertThat(a.newBlocksOfChain(new long[] {1, 2, 3, 4})).isZero();
    assertThat(a.newBlocksOfChain(new long[] {1, 2, 4, 5})).isEqualTo(1);
  }

  @Test
  void prefillTokensAreNeverNegative() {
    assertThat(ActiveSequences.prefillTokens(5, 4, 4)).isZero(); // overlap covers more than isl
    assertThat(ActiveSequences.prefillTokens(18, 4, 4)).isEqualTo(2);
    assertThat(ActiveSequences.prefillTokens(Integer.MAX_VALUE, 0, 4)).isEqualTo(Integer.MAX_VALUE);
    ActiveSequences a = sequences();
    add(a, "r", new long[] {1}, 5, 4);
    assertLoad(a, 1, 0);
  }

  @Test
  void markPrefillCompletedStopsChargingTokensButKeepsBlocks() {
    ActiveSequences a = sequences();
    add(a, "r1", new long[] {1, 2}, 8, 0);
    add(a, "r2", new long[] {1, 5}, 10, 1);
    assertLoad(a, 3, 8 + 6);
    assertThat(a.markPrefillCompleted("r1")).isTrue();
    assertLoad(a, 3, 6);
    assertThat(a.markPrefillCompleted("r1")).as("again: still in flight").isTrue();
    assertLoad(a, 3, 6);
    assertThat(a.markPrefillCompleted("nope")).isFalse();
    assertThat(a.free("r1")).isTrue();
    assertLoad(a, 2, 6); // block 1 still held by r2
    assertThat(a.free("r2")).isTrue();
    assertLoad(a, 0, 0);
  }

  @Test
  void freeOfAnUnknownOrFreedRequestReturnsFalse() {
    ActiveSequences a = sequences();
    assertThat(a.free("never")).isFalse();
    add(a, "r1", new long[] {1}, 4, 0);
    assertThat(a.free("r1")).isTrue();
    assertThat(a.free("r1")).isFalse();
    assertLoad(a, 0, 0);
  }

  @Test
  void aDuplicateRequestIdIsRejectedAndChangesNothing() {
    ActiveSequences a = sequences();
    add(a, "r1", new long[] {1, 2}, 8, 0);
    assertThatThrownBy(() -> add(a, "r1", new long[] {3}, 4, 0))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("'r1'")
        .hasMessageContaining("already in flight");
    assertLoad(a, 2, 8);
    a.free("r1");
    add(a, "r1", new long[] {3}, 4, 0); // reusable once freed
    assertLoad(a, 1, 4);
  }

  @Test
  void requestsNotFreedWithinTheDefaultExpiryAreDroppedLazily() {
    ActiveSequences a = sequences();
    long t0 = clock.get();
    add(a, "r1", new long[] {1, 2}, 8, 0);
    clock.set(t0 + 100 * SECOND);
    add(a, "r2", new long[] {1, 3}, 8, 0);
    clock.set(t0 + 300 * SECOND - 1);
    assertThat(a.expire(clock.get())).isZero();
    assertLoad(a, 3, 16);

    clock.set(t0 + 300 * SECOND); // r1's 300 s are up; nothing happens until someone asks
    assertLoad(a, 3, 16);
    assertThat(a.expire(clock.get())).isEqualTo(1);
    add(a, "r3", new long[] {9}, 4, 0);
    assertThat(expired).containsExactly("r1");
    assertLoad(a, 3, 12); // block 1 still held by r2
    assertThat(a.free("r1")).as("expired requests are gone").isFalse();

    clock.set(t0 + 400 * SECOND);
    assertThat(a.expire(clock.get())).isEqualTo(1);
    assertThat(expired).containsExactly("r1", "r2");
    assertLoad(a, 1, 4);
    assertThat(a.requestIds()).containsExactly("r3");
  }

  @Test
  void theExpiryIsConfigurableAndFreedRequestsDoNotExpire() {
    ActiveSequences a = sequences(Duration.ofMillis(10));
    add(a, "r1", new long[] {1}, 4, 0);
    add(a, "r2", new long[] {2}, 4, 0);
    add(a, "r3", new long[] {3}, 4, 0);
    a.free("r2"); // unlinked from the middle of the expiry list
    clock.addAndGet(Duration.ofMillis(10).toNanos());
    assertThat(a.expire(clock.get())).isEqualTo(2);
    assertThat(expired).containsExactly("r1", "r3");
    assertThat(freed).containsExactly("r2");
    assertLoad(a, 0, 0);
  }

  @Test
  void rejectsBadArguments() {
    assertThatThrownBy(() -> sequences(Duration.ZERO)).isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> new ActiveSequences(Duration.ofSeconds(1), null))
        .isInstanceOf(NullPointerException.class);
    ActiveSequences a = sequences();
    assertThatThrownBy(() -> a.add(null, new long[0], 0, 0))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> a.add("r", null, 0, 0)).isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> a.add("r", new long[0], -1, 0))
        .isInstanceOf(IllegalArgumentException.class);
    assertThat(a.requestCount()).isZero();
  }

  /**
   * Model-based: random adds (root chains over a small token tree, so prefixes are shared), prefill
   * completions, frees and expiries, checked after every step against a naive model; and the O(log
   * n) chain count against the exact count.
   */
  @Test
  void randomWalkAgreesWithANaiveModel() {
    forSeeds(8, this::randomWalk);
  }

  /** Runs {@code walk} for seeds 1..n, naming the seed of a failure. */
  private static void forSeeds(int n, LongConsumer walk) {
    for (long seed = 1; seed <= n; seed++) {
      try {
        walk.accept(seed);
      } catch (AssertionError e) {
        throw new AssertionError("seed " + seed + ": " + e.getMessage(), e);
      }
    }
  }

  private void randomWalk(long seed) {
    Random rnd = new Random(seed);
    final int blockSize = 4;
    final long expiry = 50;
    expired.clear();
    ActiveSequences a = sequences(Duration.ofNanos(expiry));
    Map<String, Req> model = new HashMap<>();
    for (int step = 0; step < 1_500; step++) {
      clock.addAndGet(rnd.nextInt(3));
      long now = clock.get();
      int op = rnd.nextInt(10);
      if (op < 5) {
        long[] seq = randomChain(rnd);
        int isl = seq.length * blockSize + rnd.nextInt(blockSize);
        int overlap = rnd.nextInt(seq.length + 2);
        String id = "r" + rnd.nextInt(60);
        a.expire(now);
        model.values().removeIf(r -> now - r.deadline >= 0);
        long p = Math.max(0, isl - (long) overlap * blockSize);
        if (model.containsKey(id)) {
          assertThatThrownBy(() -> a.add(id, seq, p, now))
              .isInstanceOf(IllegalArgumentException.class);
        } else {
          assertThat(a.newBlocksOfChain(seq))
              .as("step %d new blocks", step)
              .isEqualTo(modelNewBlocks(model, seq));
          assertThat(ActiveSequences.prefillTokens(isl, overlap, blockSize)).isEqualTo(p);
          a.add(id, seq, p, now);
          model.put(id, new Req(seq, new long[] {p}, now + expiry));
        }
      } else if (op < 7) {
        String id = "r" + rnd.nextInt(60);
        boolean present = model.containsKey(id) && now - model.get(id).deadline < 0;
        a.expire(now);
        model.values().removeIf(r -> now - r.deadline >= 0);
        assertThat(a.markPrefillCompleted(id)).isEqualTo(present);
        if (present) model.get(id).prefill[0] = 0;
      } else if (op < 9) {
        String id = "r" + rnd.nextInt(60);
        a.expire(now);
        model.values().removeIf(r -> now - r.deadline >= 0);
        assertThat(a.free(id)).isEqualTo(model.remove(id) != null);
      } else {
        a.expire(now);
        model.values().removeIf(r -> now - r.deadline >= 0);
      }
      assertAgrees(a, model, step);
      assertThat(a.requestCount()).isEqualTo(model.size());
    }
  }

  /**
   * Model-based over any hash arrays, not only §2 chains: arrays over a small alphabet, so the same
   * hash sits at several positions of one array and at different positions of different arrays (the
   * golden walk's case), prefixes are shared and requests end inside others' chains. After every
   * step the active blocks and prefill tokens equal the naive model's.
   */
  @Test
  void anyHashArraysAreCountedExactly() {
    forSeeds(12, this::arbitraryWalk);
  }

  private void arbitraryWalk(long seed) {
    Random rnd = new Random(seed);
    ActiveSequences a = sequences();
    Map<String, Req> model = new HashMap<>();
    List<long[]> seen = new ArrayList<>();
    for (int step = 0; step < 3_000; step++) {
      String id = "r" + rnd.nextInt(40);
      if (rnd.nextInt(10) < 6) {
        long[] seq;
        int shape = rnd.nextInt(4);
        if (shape == 0 || seen.isEmpty()) {
          seq = new long[rnd.nextInt(7)];
          for (int i = 0; i < seq.length; i++) seq[i] = rnd.nextInt(4);
        } else {
          // a prefix of an earlier array, cut or continued: requests that end inside runs, share
          // them, or leave them midway
          long[] base = seen.get(rnd.nextInt(seen.size()));
          int keep = rnd.nextInt(base.length + 1);
          seq = Arrays.copyOf(base, keep + (shape == 1 ? 0 : rnd.nextInt(4)));
          for (int i = keep; i < seq.length; i++) seq[i] = rnd.nextInt(4);
        }
        seen.add(seq);
        if (seen.size() > 64) seen.remove(0);
        if (model.containsKey(id)) continue;
        a.add(id, seq, seq.length, clock.get());
        model.put(id, new Req(seq, new long[] {seq.length}, Long.MAX_VALUE));
      } else {
        assertThat(a.free(id)).isEqualTo(model.remove(id) != null);
      }
      assertAgrees(a, model, step);
    }
  }

  /**
   * The active blocks and prefill tokens are the model's: its requests' distinct hashes and
   * charges.
   */
  private static void assertAgrees(ActiveSequences a, Map<String, Req> model, int step) {
    Set<Long> blocks = new HashSet<>();
    long tokens = 0;
    for (Req r : model.values()) {
      for (long h : r.seq) blocks.add(h);
      tokens += r.prefill[0];
    }
    assertThat(a.activeBlocks()).as("step %d blocks", step).isEqualTo(blocks.size());
    assertThat(a.activePrefillTokens()).as("step %d tokens", step).isEqualTo(tokens);
  }

  /** A request of the naive model; prefill[0] is the charge still owed. */
  private record Req(long[] seq, long[] prefill, long deadline) {}

  /** A root chain of §2 sequence hashes over a token tree of fan-out 3 and depth up to 6. */
  private static long[] randomChain(Random rnd) {
    long[] local = new long[1 + rnd.nextInt(6)];
    for (int i = 0; i < local.length; i++) local[i] = 100L + rnd.nextInt(3);
    return SequenceHasher.sequenceHashes(local);
  }

  /** How many of {@code seq} no request of the model holds. */
  private static int modelNewBlocks(Map<String, Req> model, long[] seq) {
    Set<Long> blocks = new HashSet<>();
    for (Req r : model.values()) {
      for (long h : r.seq) blocks.add(h);
    }
    int n = 0;
    for (long h : seq) {
      if (!blocks.contains(h)) n++;
    }
    return n;
  }
}
