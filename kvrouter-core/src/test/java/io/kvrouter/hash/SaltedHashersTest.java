package io.kvrouter.hash;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.TestWaits;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** The bounded cache of salted hashers: same hashes as the salts applied one by one, bounded. */
class SaltedHashersTest {
  private static final int[] TOKENS = {1, 2, 3, 4, 5, 6, 7, 8, 9};

  private static long[] expected(String lora, String ns) {
    return BlockHasher.of(4).withLora(lora).withNamespace(ns).localHashes(TOKENS);
  }

  @Test
  void hashesAsWithLoraThenWithNamespace() {
    SaltedHashers s = new SaltedHashers(4);
    String[] salts = {null, "", "a", "tenant-7", "x".repeat(SaltedHashers.MAX_CACHED_CHARS + 1)};
    for (String lora : salts) {
      for (String ns : salts) {
        assertThat(s.get(lora, ns).localHashes(TOKENS))
            .as("lora %s namespace %s", lora, ns)
            .containsExactly(expected(lora, ns));
        assertThat(BlockHasher.of(4).withSalt(lora, ns).seed())
            .isEqualTo(BlockHasher.of(4).withLora(lora).withNamespace(ns).seed());
      }
    }
    assertThat(s.get(null, "")).isSameAs(s.base());
    assertThat(s.base().seed()).isEqualTo(BlockHasher.DEFAULT_SEED);
    assertThat(s.get("a", "b").seed()).isNotEqualTo(s.get("b", "a").seed()); // which is which
  }

  @Test
  void repeatedShortSaltsAreCachedAndTheCacheIsBounded() {
    SaltedHashers s = new SaltedHashers(4);
    BlockHasher first = s.get("adapter", "tenant");
    assertThat(s.get("adapter", "tenant")).isSameAs(first);
    assertThat(s.get(new String("adapter"), new String("tenant"))).isSameAs(first);
    assertThat(s.size()).isEqualTo(1);
    for (int i = 0; i < 10_000; i++) s.get("adapter-" + i, "tenant-" + (i % 7));
    assertThat(s.size()).isGreaterThan(SaltedHashers.CAPACITY / 2);
    assertThat(s.size()).isLessThanOrEqualTo(SaltedHashers.CAPACITY);
    // a salt pair over the limit is built every time and never kept
    SaltedHashers fresh = new SaltedHashers(4);
    String longSalt = "n".repeat(SaltedHashers.MAX_CACHED_CHARS);
    assertThat(fresh.get("l", longSalt)).isNotSameAs(fresh.get("l", longSalt));
    assertThat(fresh.size()).isZero();
    assertThat(fresh.get(null, longSalt)).isSameAs(fresh.get(null, longSalt)); // 256: cached
  }

  /** Threads racing on the same few slots always get a hasher for the salts they asked for. */
  @Test
  void concurrentLookupsGetTheirOwnSalts() throws Exception {
    SaltedHashers s = new SaltedHashers(4);
    List<long[]> want = new ArrayList<>();
    for (int i = 0; i < 200; i++) want.add(expected("l" + (i % 5), "n" + i));
    ExecutorService pool = Executors.newFixedThreadPool(4);
    CountDownLatch start = new CountDownLatch(1);
    try {
      List<Future<Integer>> done = new ArrayList<>();
      for (int t = 0; t < 4; t++) {
        final int offset = t * 37;
        done.add(
            pool.submit(
                () -> {
                  start.await();
                  int checked = 0;
                  for (int k = 0; k < 20_000; k++) {
                    int i = (k + offset) % 200;
                    long[] got = s.get("l" + (i % 5), "n" + i).localHashes(TOKENS);
                    if (!Arrays.equals(got, want.get(i))) {
                      throw new AssertionError("wrong hasher for salt " + i);
                    }
                    checked++;
                  }
                  return checked;
                }));
      }
      start.countDown();
      for (Future<Integer> f : done)
        assertThat(f.get(TestWaits.WAIT.toSeconds(), TimeUnit.SECONDS)).isEqualTo(20_000);
    } finally {
      pool.shutdownNow();
    }
  }
}
