package io.kvrouter.route;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import io.kvrouter.hash.BlockHasher;
import io.kvrouter.hash.SaltedHashers;
import io.kvrouter.hash.SequenceHasher;
import java.lang.management.ManagementFactory;
import java.lang.management.MemoryMXBean;
import org.junit.jupiter.api.Test;

/**
 * LoRA names and namespaces salt the hashes routing matches (DESIGN.md §2), and since they are the
 * clients' strings, the router keeps no more of them than a small bound however many there are.
 */
class SaltedRoutingTest {
  private static final int BS = KvRouterTest.BS;

  @Test
  void onlyBlocksCachedWithTheSameSaltsMatch() {
    KvRouter router = KvRouter.builder(BS).build();
    router.registerWorker(1, 1, BS);
    router.registerWorker(2, 1, BS);
    int[] prompt = KvRouterTest.tokens(1, 16);
    long[] local =
        BlockHasher.of(BS).withLora("adapter").withNamespace("tenant").localHashes(prompt);
    router.applyEvent(
        new RouterEvent(
            Worker.of(2), 0, CacheEvent.storedAtRoot(SequenceHasher.sequenceHashes(local), local)));
    RouteOptions salted = RouteOptions.defaults().withLora("adapter").withNamespace("tenant");
    assertThat(router.overlaps(prompt, salted).score(Worker.of(2))).isEqualTo(4);
    assertThat(router.overlaps(prompt, RouteOptions.defaults()).score(Worker.of(2))).isZero();
    assertThat(router.overlaps(prompt, salted.withNamespace("other")).score(Worker.of(2))).isZero();
    assertThat(router.overlaps(prompt, salted.withLora(null)).score(Worker.of(2))).isZero();
    RouteDecision.Routed d = KvRouterTest.routed(router.route("r", prompt, salted));
    assertThat(d.worker()).isEqualTo(Worker.of(2));
    assertThat(d.overlapBlocks()).isEqualTo(4);
  }

  /**
   * 10,000 requests with distinct 64 KiB namespaces (625 MiB of salt in all) and 10,000 with
   * distinct short ones: at most {@link SaltedHashers#CAPACITY} hashers stay cached, long salts
   * never, and the heap after a full GC holds far less than the salts (a router keeping each one
   * would hold over 600 MiB; the bound is 200 MiB).
   */
  @Test
  void distinctSaltsWithoutEndKeepABoundedFootprint() {
    KvRouter router = KvRouter.builder(BS).build();
    router.registerWorker(1, 1, BS);
    int[] prompt = KvRouterTest.tokens(1, 64);
    String big = "s".repeat(64 * 1024);
    MemoryMXBean memory = ManagementFactory.getMemoryMXBean();
    long before = usedAfterGc(memory);
    for (int i = 0; i < 10_000; i++) {
      RouteOptions o = RouteOptions.defaults().withNamespace(i + ":" + big);
      if (i % 3 == 0) o = o.withLora("adapter-" + i);
      KvRouterTest.routed(router.route("r", prompt, o));
      assertThat(router.free("r")).isTrue();
    }
    assertThat(router.cachedSaltedHashers()).as("long salts are never cached").isZero();
    long grown = usedAfterGc(memory) - before;
    assertThat(grown).as("heap growth in bytes").isLessThan(200L << 20);

    for (int i = 0; i < 10_000; i++) {
      KvRouterTest.routed(
          router.route("r", prompt, RouteOptions.defaults().withNamespace("tenant-" + i)));
      router.free("r");
    }
    assertThat(router.cachedSaltedHashers())
        .isGreaterThan(0)
        .isLessThanOrEqualTo(SaltedHashers.CAPACITY);
    assertThat(router.inFlight()).isZero();
  }

  private static long usedAfterGc(MemoryMXBean memory) {
    memory.gc();
    memory.gc();
    return memory.getHeapMemoryUsage().getUsed();
  }
}
