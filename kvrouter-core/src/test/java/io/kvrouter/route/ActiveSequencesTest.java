package io.kvrouter.route;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.kvrouter.hash.SequenceHasher;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;

/** Load accounting per worker rank (DESIGN.md §6): blocks, prefill tokens, expiry. */
class ActiveSequencesTest {
  private static final long SECOND = 1_000_000_000L;

  private final AtomicLong clock = new AtomicLong(1_000 * SECOND);
  private final List<String> expired = new ArrayList<>();
  private final List<String> freed = new ArrayList<>();

  private ActiveSequences sequences(int blockSize, Duration expiry) {
    return new ActiveSequences(
        blockSize,
        expiry,
        clock::get,
        (id, seq, byExpiry) -> {
          if (byExpiry) expired.add(id);
          else freed.add(id);
        });
  }

  private static void assertLoad(ActiveSequences a, int blocks, long tokens) {
    assertThat(a.activeBlocks()).as("active blocks").isEqualTo(blocks);
    assertThat(a.activePrefillTokens()).as("active prefill tokens").isEqualTo(tokens);
  }

  @Test
  void goldenWalkFromTheDesign() {
    ActiveSequences a = new ActiveSequences(4);
    a.add("r1", new long[] {1, 2, 3}, 12, 0);
    assertLoad(a, 3, 12);
    a.add("r2", new long[] {4}, 4, 0);
    assertLoad(a, 4, 16);
    a.add("r3", new long[] {1, 2, 3, 4}, 16, 4);
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
  void potentialLoadCountsOnlyNewBlocksAndTheRequestsPrefill() {
    ActiveSequences a = new ActiveSequences(4);
    a.add("r1", new long[] {1, 2, 3}, 12, 0);
    // blocks 1..3 active, 4 new; 16 tokens with 3 cached blocks → 4 prefill tokens
    assertThat(a.potentialLoad(new long[] {1, 2, 3, 4}, 16, 3))
        .isEqualTo(new ActiveSequences.Load(4, 16));
    assertThat(a.potentialLoad(new long[] {7, 8}, 8, 0)).isEqualTo(new ActiveSequences.Load(5, 20));
    assertThat(a.potentialLoad(new long[0], 0, 0)).isEqualTo(new ActiveSequences.Load(3, 12));
    assertLoad(a, 3, 12); // asking changes nothing
  }

  @Test
  void prefillTokensAreNeverNegative() {
    assertThat(ActiveSequences.prefillTokens(5, 4, 4)).isZero(); // overlap covers more than isl
    assertThat(ActiveSequences.prefillTokens(18, 4, 4)).isEqualTo(2);
    assertThat(ActiveSequences.prefillTokens(Integer.MAX_VALUE, 0, 4)).isEqualTo(Integer.MAX_VALUE);
    ActiveSequences a = new ActiveSequences(4);
    a.add("r", new long[] {1}, 5, 4);
    assertLoad(a, 1, 0);
  }

  @Test
  void markPrefillCompletedStopsChargingTokensButKeepsBlocks() {
    ActiveSequences a = new ActiveSequences(4);
    a.add("r1", new long[] {1, 2}, 8, 0);
    a.add("r2", new long[] {1, 5}, 10, 1);
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
    ActiveSequences a = new ActiveSequences(4);
    assertThat(a.free("never")).isFalse();
    a.add("r1", new long[] {1}, 4, 0);
    assertThat(a.free("r1")).isTrue();
    assertThat(a.free("r1")).isFalse();
    assertLoad(a, 0, 0);
  }

  @Test
  void aDuplicateRequestIdIsRejectedAndChangesNothing() {
    ActiveSequences a = new ActiveSequences(4);
    a.add("r1", new long[] {1, 2}, 8, 0);
    assertThatThrownBy(() -> a.add("r1", new long[] {3}, 4, 0))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("'r1'")
        .hasMessageContaining("already in flight");
    assertLoad(a, 2, 8);
    a.free("r1");
    a.add("r1", new long[] {3}, 4, 0); // reusable once freed
    assertLoad(a, 1, 4);
  }

  @Test
  void requestsNotFreedWithinTheDefaultExpiryAreDroppedLazily() {
    ActiveSequences a = sequences(4, ActiveSequences.DEFAULT_EXPIRY);
    long t0 = clock.get();
    a.add("r1", new long[] {1, 2}, 8, 0);
    clock.set(t0 + 100 * SECOND);
    a.add("r2", new long[] {1, 3}, 8, 0);
    clock.set(t0 + 300 * SECOND - 1);
    assertThat(a.expire()).isZero();
    assertLoad(a, 3, 16);

    clock.set(t0 + 300 * SECOND); // r1's 300 s are up; nothing happens until someone asks
    assertLoad(a, 3, 16);
    a.add("r3", new long[] {9}, 4, 0); // add expires lazily
    assertThat(expired).containsExactly("r1");
    assertLoad(a, 3, 12); // block 1 still held by r2
    assertThat(a.free("r1")).as("expired requests are gone").isFalse();
    assertThat(a.expiredRequests()).isEqualTo(1);

    clock.set(t0 + 400 * SECOND);
    assertThat(a.expire()).isEqualTo(1);
    assertThat(expired).containsExactly("r1", "r2");
    assertLoad(a, 1, 4);
    assertThat(a.requestIds()).containsExactly("r3");
  }

  @Test
  void theExpiryIsConfigurableAndFreedRequestsDoNotExpire() {
    ActiveSequences a = sequences(4, Duration.ofMillis(10));
    a.add("r1", new long[] {1}, 4, 0);
    a.add("r2", new long[] {2}, 4, 0);
    a.add("r3", new long[] {3}, 4, 0);
    a.free("r2"); // unlinked from the middle of the expiry list
    clock.addAndGet(Duration.ofMillis(10).toNanos());
    assertThat(a.expire()).isEqualTo(2);
    assertThat(expired).containsExactly("r1", "r3");
    assertThat(freed).containsExactly("r2");
    assertLoad(a, 0, 0);
  }

  @Test
  void rejectsBadArguments() {
    assertThatThrownBy(() -> new ActiveSequences(0)).isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> sequences(4, Duration.ZERO))
        .isInstanceOf(IllegalArgumentException.class);
    ActiveSequences a = new ActiveSequences(4);
    assertThatThrownBy(() -> a.add(null, new long[0], 0, 0))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> a.add("r", new long[0], -1, 0))
        .isInstanceOf(IllegalArgumentException.class);
  }

  /**
   * Model-based: random adds (root chains over a small token tree, so prefixes are shared), prefill
   * completions, frees and expiries, checked after every step against a naive model; and the O(log
   * n) chain count against the exact count.
   */
  @Test
  void randomWalkAgreesWithANaiveModel() {
    for (long seed = 1; seed <= 8; seed++) {
      try {
        randomWalk(seed);
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
    ActiveSequences a = sequences(blockSize, Duration.ofNanos(expiry));
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
        if (model.containsKey(id)) {
          assertThatThrownBy(() -> a.add(id, seq, isl, overlap))
              .isInstanceOf(IllegalArgumentException.class);
        } else {
          ActiveSequences.Load expected = modelPotential(model, seq, isl, overlap, blockSize);
          assertThat(a.potentialLoad(seq, isl, overlap)).isEqualTo(expected);
          assertThat(a.newBlocksOfChain(seq)).isEqualTo(a.newBlocks(seq));
          a.add(id, seq, isl, overlap);
          long p = Math.max(0, isl - (long) overlap * blockSize);
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
      Set<Long> blocks = new HashSet<>();
      long tokens = 0;
      for (Req r : model.values()) {
        for (long h : r.seq) blocks.add(h);
        tokens += r.prefill[0];
      }
      assertThat(a.activeBlocks()).as("step %d blocks", step).isEqualTo(blocks.size());
      assertThat(a.activePrefillTokens()).as("step %d tokens", step).isEqualTo(tokens);
      assertThat(a.requestCount()).isEqualTo(model.size());
    }
  }

  /** A request of the naive model; prefill[0] is the charge still owed. */
  private record Req(long[] seq, long[] prefill, long deadline) {}

  /** A root chain of §2 sequence hashes over a token tree of fan-out 3 and depth up to 6. */
  private static long[] randomChain(Random rnd) {
    long[] local = new long[1 + rnd.nextInt(6)];
    for (int i = 0; i < local.length; i++) local[i] = 100 + rnd.nextInt(3);
    return SequenceHasher.sequenceHashes(local);
  }

  private static ActiveSequences.Load modelPotential(
      Map<String, Req> model, long[] seq, int isl, int overlap, int blockSize) {
    Set<Long> blocks = new HashSet<>();
    long tokens = 0;
    for (Req r : model.values()) {
      for (long h : r.seq) blocks.add(h);
      tokens += r.prefill[0];
    }
    for (long h : seq) blocks.add(h);
    return new ActiveSequences.Load(
        blocks.size(), tokens + Math.max(0, isl - (long) overlap * blockSize));
  }
}
