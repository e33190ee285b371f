package io.kvrouter.server;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** MetricsRenderer: one rendering at a time, off the caller's thread, shared, never stale. */
class MetricsRendererTest {
  @Test
  @Timeout(value = 2, unit = TimeUnit.MINUTES)
  void scrapesThatArriveDuringARenderingShareTheNextOne() throws Exception {
    AtomicInteger calls = new AtomicInteger();
    CountDownLatch entered = new CountDownLatch(1);
    CountDownLatch go = new CountDownLatch(1);
    List<String> threads = new CopyOnWriteArrayList<>();
    MetricsRenderer r =
        new MetricsRenderer(
            out -> {
              int n = calls.incrementAndGet();
              threads.add(Thread.currentThread().getName());
              if (n == 1) {
                entered.countDown();
                try {
                  go.await();
                } catch (InterruptedException e) {
                  throw new IOException(e);
                }
              }
              out.write(("rendering " + n).getBytes(StandardCharsets.US_ASCII));
            });
    int waiting = 12;
    try (ExecutorService clients = Executors.newVirtualThreadPerTaskExecutor()) {
      Future<byte[]> first = clients.submit(r::render);
      entered.await();
      List<Future<byte[]>> later = new ArrayList<>();
      for (int i = 0; i < waiting; i++) later.add(clients.submit(r::render));
      // all of them have joined the rendering that has not started yet
      while (r.requests() < 1 + waiting) Thread.onSpinWait();
      go.countDown();
      assertThat(new String(first.get(), StandardCharsets.US_ASCII)).isEqualTo("rendering 1");
      for (Future<byte[]> f : later) {
        // rendered after they arrived (not the rendering already running), and only once for all
        assertThat(new String(f.get(), StandardCharsets.US_ASCII)).isEqualTo("rendering 2");
      }
    }
    assertThat(calls.get()).isEqualTo(2);
    assertThat(r.renders()).isEqualTo(2);
    assertThat(threads).containsOnly("kvrouter-metrics-render");
    // a later scrape gets a new rendering
    assertThat(new String(r.render(), StandardCharsets.US_ASCII)).isEqualTo("rendering 3");
  }

  @Test
  @Timeout(value = 2, unit = TimeUnit.MINUTES)
  void aFailedRenderingIsTheCallersIOExceptionAndTheNextOneWorks() throws Exception {
    AtomicInteger calls = new AtomicInteger();
    MetricsRenderer r =
        new MetricsRenderer(
            out -> {
              if (calls.incrementAndGet() == 1) throw new IOException("scrape failed");
              out.write('x');
            });
    assertThatThrownBy(r::render).isInstanceOf(IOException.class).hasMessage("scrape failed");
    assertThat(r.render()).containsExactly('x');
  }
}
