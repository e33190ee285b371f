package io.kvrouter.server;

import com.google.errorprone.annotations.concurrent.GuardedBy;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InterruptedIOException;
import java.io.OutputStream;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Renders the answer of {@code GET /metrics} into a byte array, on one platform thread of its own,
 * one rendering at a time, shared by every request waiting for it (issue 31, #7).
 *
 * <pre>
 * Implementation notes
 *
 * Why: Helidon runs each connection, and its handlers, on a virtual thread, and virtual threads
 * are not preempted. A scrape is CPU work (the registry's collect, the JVM thread metrics' calls
 * that stop the VM at a safepoint, the text format), and a client that pipelines GET /metrics
 * without reading had it done back to back on its connection's thread until the kernel's socket
 * buffers filled (megabytes on loopback: hundreds of scrapes), holding a carrier the whole time.
 * Three such clients held both carriers of a 2-core machine: /health waited 8.5 s. Here the work
 * runs on this object's platform thread, which the OS schedules fairly against the carriers, and
 * a request's virtual thread parks meanwhile; the answer is then written from the array (with a
 * Content-Length) with no lock held, so a client that does not read blocks only its own thread,
 * until the write deadline closes its connection (WriteDeadline).
 *
 * Coalescing: pending is the rendering that has not started yet. A request joins it (or makes it
 * and submits it); the executor's one thread takes it, and the moment it starts, pending is
 * cleared, so later requests make the next one. Every answer is therefore rendered after its
 * request arrived (never stale), at most one rendering runs at a time, and at most one waits: N
 * scrapers at once cost two renderings, not N. pending is guarded by this object's monitor; the
 * executor has at most one thread, which ends after IDLE_SECONDS idle, so nothing is left to stop.
 * </pre>
 */
final class MetricsRenderer {
  /** Writes one scrape to a stream. */
  @FunctionalInterface
  interface Scrape {
    void writeTo(OutputStream out) throws IOException;
  }

  private static final long IDLE_SECONDS = 10;

  private final Scrape scrape;
  private final ThreadPoolExecutor thread;
  private final AtomicLong renders = new AtomicLong();
  private final AtomicLong requests = new AtomicLong();
  private volatile int lastSize = 64 << 10;

  @GuardedBy("this")
  private CompletableFuture<byte[]> pending; // guarded by this

  MetricsRenderer(Scrape scrape) {
    this.scrape = scrape;
    this.thread =
        new ThreadPoolExecutor(
            0,
            1,
            IDLE_SECONDS,
            TimeUnit.SECONDS,
            new LinkedBlockingQueue<>(),
            r -> Thread.ofPlatform().daemon().name("kvrouter-metrics-render").unstarted(r));
  }

  /** A scrape rendered after this call began; parks the caller while it is rendered. */
  byte[] render() throws IOException {
    CompletableFuture<byte[]> f;
    synchronized (this) {
      f = pending;
      if (f == null) {
        CompletableFuture<byte[]> mine = new CompletableFuture<>();
        pending = mine;
        f = mine;
        thread.execute(() -> run(mine));
      }
    }
    requests.incrementAndGet();
    try {
      return f.get();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new InterruptedIOException("interrupted while /metrics was rendered");
    } catch (ExecutionException e) {
      Throwable c = e.getCause();
      if (c instanceof IOException io) throw io;
      if (c instanceof RuntimeException re) throw re;
      if (c instanceof Error err) throw err;
      throw new IOException(c);
    }
  }

  /** Requests that have joined a rendering so far (tests). */
  long requests() {
    return requests.get();
  }

  /** Renderings done so far (tests). */
  long renders() {
    return renders.get();
  }

  private void run(CompletableFuture<byte[]> f) {
    synchronized (this) {
      if (pending == f) pending = null; // started: later requests need the next one
    }
    try {
      ByteArrayOutputStream out = new ByteArrayOutputStream(lastSize + (lastSize >> 3));
      scrape.writeTo(out);
      byte[] b = out.toByteArray();
      lastSize = b.length;
      renders.incrementAndGet();
      f.complete(b);
    } catch (Throwable t) {
      f.completeExceptionally(t);
    }
  }
}
