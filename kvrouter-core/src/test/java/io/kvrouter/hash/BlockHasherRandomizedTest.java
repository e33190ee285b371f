package io.kvrouter.hash;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.dynatrace.hash4j.hashing.Hashing;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;

/**
 * {@link BlockHasher} and {@link SequenceHasher} against a naive reference written from DESIGN.md
 * §2 alone: every block's bytes built one by one into a fresh array, multimodal hashes sorted
 * unsigned, the salted seed and the sequence chain computed here. Random prompts (lengths across
 * the hasher's internal chunk of 8,192 tokens, block sizes from 1 to past a chunk, token ids over
 * all 32 bits), random mm hashes and salts; one hasher instance serves prompts of every length in
 * turn, so stale scratch bytes would show. The seed of a failing case is in the message.
 */
class BlockHasherRandomizedTest {
  private static final long BASE_SEED = 0x21_2026L;
  private static final int CASES = 400;

  // ---------------------------------------------------------------- the reference (DESIGN.md §2)

  private static long refSeed(String lora, String namespace) {
    long seed = 1337L;
    if (lora != null && !lora.isEmpty()) {
      seed += Hashing.xxh3_64(0L).hashBytesToLong(lora.getBytes(StandardCharsets.UTF_8));
    }
    if (namespace != null && !namespace.isEmpty()) {
      seed += Hashing.xxh3_64(1L).hashBytesToLong(namespace.getBytes(StandardCharsets.UTF_8));
    }
    return seed;
  }

  private static long[] refLocal(int[] tokens, int blockSize, Map<Integer, long[]> mm, long seed) {
    int blocks = tokens.length / blockSize;
    long[] out = new long[blocks];
    for (int b = 0; b < blocks; b++) {
      List<Long> extra = new ArrayList<>();
      if (mm.containsKey(b)) {
        for (long v : mm.get(b)) extra.add(v);
      }
      extra.sort(Long::compareUnsigned);
      byte[] bytes = new byte[blockSize * 4 + extra.size() * 8];
      int p = 0;
      for (int i = 0; i < blockSize; i++) {
        long v = tokens[b * blockSize + i] & 0xFFFF_FFFFL;
        for (int k = 0; k < 4; k++) bytes[p++] = (byte) ((v >> (8 * k)) & 0xFF);
      }
      for (long v : extra) {
        for (int k = 0; k < 8; k++) bytes[p++] = (byte) ((v >>> (8 * k)) & 0xFF);
      }
      out[b] = Hashing.xxh3_64(seed).hashBytesToLong(bytes);
    }
    return out;
  }

  private static long[] refSequence(long[] local, long chainSeed) {
    long[] out = new long[local.length];
    for (int i = 0; i < local.length; i++) {
      if (i == 0) {
        out[0] = local[0];
        continue;
      }
      byte[] bytes = new byte[16];
      for (int k = 0; k < 8; k++) bytes[k] = (byte) (out[i - 1] >>> (8 * k));
      for (int k = 0; k < 8; k++) bytes[8 + k] = (byte) (local[i] >>> (8 * k));
      out[i] = Hashing.xxh3_64(chainSeed).hashBytesToLong(bytes);
    }
    return out;
  }

  // ---------------------------------------------------------------- random cases

  private static int blockSize(SplittableRandom r) {
    return switch (r.nextInt(6)) {
      case 0 -> 1 + r.nextInt(4);
      case 1 -> 16;
      case 2 -> 64;
      case 3 -> 8193 + r.nextInt(2000); // one block longer than a chunk
      default -> 1 + r.nextInt(130);
    };
  }

  private static int[] tokens(SplittableRandom r, int blockSize) {
    int len =
        switch (r.nextInt(5)) {
          case 0 -> r.nextInt(2 * blockSize + 3);
          case 1 -> 8192 + r.nextInt(-3, 4); // around a chunk
          case 2 -> r.nextInt(30_000);
          default -> r.nextInt(2_100);
        };
    int[] t = new int[Math.max(0, len)];
    for (int i = 0; i < t.length; i++) t[i] = r.nextBoolean() ? r.nextInt(152_064) : r.nextInt();
    return t;
  }

  private static String salt(SplittableRandom r) {
    return switch (r.nextInt(4)) {
      case 0 -> null;
      case 1 -> "";
      default -> "adapter-" + Long.toHexString(r.nextLong()) + (r.nextBoolean() ? "é" : "");
    };
  }

  @Test
  void localHashesEqualTheReference() {
    for (int c = 0; c < CASES; c++) {
      long seed = BASE_SEED + c;
      SplittableRandom r = new SplittableRandom(seed);
      int blockSize = blockSize(r);
      int[] tokens = tokens(r, blockSize);
      String lora = salt(r);
      String ns = salt(r);
      BlockHasher hasher = BlockHasher.of(blockSize);
      if (r.nextBoolean()) hasher = hasher.withLora(lora).withNamespace(ns);
      else {
        lora = null;
        ns = null;
      }
      long s = refSeed(lora, ns);
      String what = "seed " + seed + " (blockSize " + blockSize + ", " + tokens.length + " tokens)";
      long[] expected = refLocal(tokens, blockSize, Map.of(), s);
      long[] local = hasher.localHashes(tokens);
      assertThat(local).as(what).isEqualTo(expected);
      assertThat(hasher.localHashes(tokens, Map.of())).as(what).isEqualTo(expected);
      assertThat(SequenceHasher.sequenceHashes(local)).as(what).isEqualTo(refSequence(local, 1337));
      long chainSeed = r.nextBoolean() ? 0 : r.nextLong();
      assertThat(SequenceHasher.sequenceHashes(local, chainSeed))
          .as(what)
          .isEqualTo(refSequence(local, chainSeed));
    }
  }

  @Test
  void aRangeOfTokensHashesLikeItsCopy() {
    for (int c = 0; c < CASES; c++) {
      long seed = BASE_SEED + 7_000 + c;
      SplittableRandom r = new SplittableRandom(seed);
      int blockSize = blockSize(r);
      int[] tokens = tokens(r, blockSize);
      int from = tokens.length == 0 ? 0 : r.nextInt(tokens.length + 1);
      int to = from + r.nextInt(tokens.length - from + 1);
      String what = "seed " + seed + " ([" + from + ", " + to + ") of " + tokens.length + ")";
      long[] expected = refLocal(Arrays.copyOfRange(tokens, from, to), blockSize, Map.of(), 1337);
      assertThat(BlockHasher.of(blockSize).localHashes(tokens, from, to))
          .as(what)
          .isEqualTo(expected);
    }
    BlockHasher h = BlockHasher.of(4);
    int[] t = new int[10];
    assertThatThrownBy(() -> h.localHashes(t, 6, 5))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessage("range [6, 5) is not within 10 tokens");
    assertThatThrownBy(() -> h.localHashes(t, 0, 11)).isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> h.localHashes(t, -1, 4)).isInstanceOf(IllegalArgumentException.class);
  }

  @Test
  void multimodalHashesEqualTheReference() {
    for (int c = 0; c < CASES; c++) {
      long seed = ~BASE_SEED + c;
      SplittableRandom r = new SplittableRandom(seed);
      int blockSize = r.nextInt(4) == 0 ? blockSize(r) : 1 + r.nextInt(64);
      int[] tokens = tokens(r, blockSize);
      int blocks = tokens.length / blockSize;
      Map<Integer, long[]> mm = new HashMap<>();
      int entries = r.nextInt(6);
      for (int e = 0; e < entries; e++) {
        long[] hashes = new long[r.nextInt(5)];
        for (int k = 0; k < hashes.length; k++) hashes[k] = r.nextLong();
        // mostly blocks of the prompt, sometimes past its end (ignored)
        mm.put(r.nextInt(Math.max(1, blocks + 2)), hashes);
      }
      BlockHasher hasher = BlockHasher.of(blockSize).withNamespace("ns-" + (seed & 7));
      String what = "seed " + seed + " (blockSize " + blockSize + ", " + tokens.length + " tokens)";
      assertThat(hasher.localHashes(tokens, mm))
          .as(what)
          .isEqualTo(refLocal(tokens, blockSize, mm, refSeed(null, "ns-" + (seed & 7))));
      // a plain call right after, on the same thread's scratch, is unaffected by the mm bytes
      assertThat(hasher.localHashes(tokens))
          .as(what)
          .isEqualTo(refLocal(tokens, blockSize, Map.of(), refSeed(null, "ns-" + (seed & 7))));
    }
  }

  /**
   * Many threads at once (eight times as many as the hasher's scratch pool has slots, so slots are
   * shared), each hashing its own prompts and comparing with the reference computed beforehand: a
   * scratch used by two threads at a time would give wrong hashes.
   */
  @Test
  void concurrentCallersGetTheirOwnHashes() throws Exception {
    final int threads = 64;
    final int prompts = 8;
    final long seed = BASE_SEED ^ 0x5eed;
    SplittableRandom r = new SplittableRandom(seed);
    int[][][] tokens = new int[threads][prompts][];
    long[][][] expected = new long[threads][prompts][];
    BlockHasher hasher = BlockHasher.of(16);
    for (int t = 0; t < threads; t++) {
      for (int p = 0; p < prompts; p++) {
        int[] tk = new int[1024 + r.nextInt(4_000)];
        for (int i = 0; i < tk.length; i++) tk[i] = r.nextInt();
        tokens[t][p] = tk;
        expected[t][p] = refLocal(tk, 16, Map.of(), 1337L);
      }
    }
    CountDownLatch start = new CountDownLatch(1);
    AtomicReference<String> failure = new AtomicReference<>();
    List<Thread> all = new ArrayList<>();
    for (int t = 0; t < threads; t++) {
      final int me = t;
      Thread th =
          new Thread(
              () -> {
                try {
                  start.await();
                  for (int round = 0; round < 300 && failure.get() == null; round++) {
                    int p = round % prompts;
                    if (!Arrays.equals(hasher.localHashes(tokens[me][p]), expected[me][p])) {
                      failure.compareAndSet(
                          null, "thread " + me + " prompt " + p + " round " + round);
                    }
                  }
                } catch (InterruptedException e) {
                  Thread.currentThread().interrupt();
                }
              });
      th.start();
      all.add(th);
    }
    start.countDown();
    for (Thread th : all) th.join();
    assertThat(failure.get()).as("seed " + seed).isNull();
  }
}
