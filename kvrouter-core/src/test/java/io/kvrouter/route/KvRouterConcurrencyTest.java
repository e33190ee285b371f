package io.kvrouter.route;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.TestWaits;
import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import io.kvrouter.hash.BlockHasher;
import io.kvrouter.hash.SequenceHasher;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;

/**
 * Many threads routing, completing and freeing at once (while events, or predictions, change the
 * index): afterwards every load is back to zero and nothing was lost or double-counted.
 */
class KvRouterConcurrencyTest {
  private static final int BS = 4;
  private static final int WORKERS = 6;
  private static final int THREADS = 4;
  private static final int ROUTES_PER_THREAD = 3_000;

  /** Prompts from 8 shared 32-token prefixes plus a per-request suffix. */
  private static int[] prompt(Random rnd) {
    int prefix = rnd.nextInt(8);
    int[] t = new int[32 + 4 * rnd.nextInt(8) + rnd.nextInt(BS)];
    for (int i = 0; i < 32; i++) t[i] = prefix * 1000 + i;
    for (int i = 32; i < t.length; i++) t[i] = rnd.nextInt(50);
    return t;
  }

  @Test
  void eventModeLoadsReturnToZero() throws Exception {
    KvRouter router = KvRouter.builder(BS).temperature(0.3).seed(1).build();
    for (int i = 0; i < WORKERS; i++) router.registerWorker(i, i % 2 + 1, BS);
    AtomicBoolean stop = new AtomicBoolean();
    ExecutorService pool = Executors.newFixedThreadPool(THREADS + 1);
    try {
      // a writer thread keeps storing and removing prefixes for random workers
      Future<Long> writer =
          pool.submit(
              () -> {
                Random rnd = new Random(99);
                BlockHasher hasher = BlockHasher.of(BS);
                long events = 0;
                while (!stop.get()) {
                  Worker w = new Worker(rnd.nextInt(WORKERS), 0);
                  long[] local = hasher.localHashes(prompt(rnd));
                  long[] seq = SequenceHasher.sequenceHashes(local);
                  router.applyEvent(
                      new RouterEvent(w, events++, CacheEvent.storedAtRoot(seq, local)));
                  if (rnd.nextBoolean()) {
                    router.applyEvent(
                        new RouterEvent(w, events++, CacheEvent.removed(seq[seq.length - 1])));
                  }
                }
                return events;
              });
      long routed = runRouters(router, pool);
      stop.set(true);
      assertThat(writer.get(TestWaits.WAIT.toSeconds(), TimeUnit.SECONDS)).isPositive();
      assertThat(routed).isEqualTo((long) THREADS * ROUTES_PER_THREAD);
    } finally {
      pool.shutdownNow();
    }
    assertAllIdle(router);
  }

  @Test
  void approximateModeLoadsAndPredictionsReturnToZero() throws Exception {
    AtomicLong clock = new AtomicLong();
    KvRouter router =
        KvRouter.builder(BS)
            .approximate(Duration.ofNanos(2_000_000), 500)
            .nanoClock(() -> clock.addAndGet(1_000))
            .build();
    for (int i = 0; i < WORKERS; i++) router.registerWorker(i, 1, BS);
    ExecutorService pool = Executors.newFixedThreadPool(THREADS);
    try {
      assertThat(runRouters(router, pool)).isEqualTo((long) THREADS * ROUTES_PER_THREAD);
    } finally {
      pool.shutdownNow();
    }
    assertAllIdle(router);
    assertThat(router.predictedEntries()).isBetween(1, 500);
    clock.addAndGet(10_000_000); // past every TTL
    router.expire();
    assertThat(router.predictedEntries()).isZero();
    assertThat(router.index().stats().blocksIndexed()).isZero();
  }

  /**
   * THREADS threads each route ROUTES_PER_THREAD requests with unique ids, mark some prefill
   * complete, keep up to 16 in flight and free the oldest; at the end each frees the rest. Every
   * free must find its request. Returns how many requests were routed.
   */
  private static long runRouters(KvRouter router, ExecutorService pool) throws Exception {
    CountDownLatch start = new CountDownLatch(1);
    List<Future<Integer>> futures = new ArrayList<>();
    for (int t = 0; t < THREADS; t++) {
      final int thread = t;
      Callable<Integer> task =
          () -> {
            Random rnd = new Random(1000 + thread);
            ArrayDeque<String> inFlight = new ArrayDeque<>();
            int routed = 0;
            start.await();
            for (int i = 0; i < ROUTES_PER_THREAD; i++) {
              String id = "t" + thread + "-" + i;
              RouteOptions options =
                  rnd.nextInt(4) == 0
                      ? RouteOptions.defaults().withAllowedWorkers(thread % WORKERS, 5)
                      : RouteOptions.defaults();
              RouteDecision d = router.route(id, prompt(rnd), options);
              if (!(d instanceof RouteDecision.Routed)) {
                throw new AssertionError("unexpected " + d);
              }
              routed++;
              inFlight.add(id);
              if (rnd.nextBoolean() && !router.markPrefillCompleted(id)) {
                throw new AssertionError("lost " + id);
              }
              if (inFlight.size() > 16 && !router.free(inFlight.poll())) {
                throw new AssertionError("lost a request before " + id);
              }
            }
            for (String id : inFlight) {
              if (!router.free(id)) throw new AssertionError("lost " + id);
            }
            return routed;
          };
      futures.add(pool.submit(task));
    }
    start.countDown();
    long total = 0;
    for (Future<Integer> f : futures) total += f.get(TestWaits.WAIT.toSeconds(), TimeUnit.SECONDS);
    return total;
  }

  private static void assertAllIdle(KvRouter router) {
    assertThat(router.inFlight()).isZero();
    assertThat(router.loads()).isNotEmpty().allSatisfy(l -> assertThat(l.isIdle()).isTrue());
  }
}
