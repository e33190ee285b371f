package io.kvrouter.gateway;

import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Supplier;

/**
 * Where the gateway tokenizes (chat templates and encoding): a bounded pool of platform threads, so
 * that a huge prompt does not hold one of the few carrier threads that every virtual thread (the
 * {@code /health}, {@code /ready} and {@code /metrics} requests among them) runs on. The operating
 * system shares the cores between these threads and the carriers.
 *
 * <pre>
 * Implementation notes
 *
 * A ThreadPoolExecutor of as many daemon platform threads as the machine has cores and a queue of
 * QUEUE tasks; a task that finds both full is refused (RejectedExecutionException becomes a 429).
 * The request's virtual thread submits and waits on the Future (unmounted, its carrier free);
 * active counts the tasks submitted and not done (for tests). A tokenization is CPU work without
 * blocking, so the threads are never more than the cores.
 * </pre>
 */
final class TokenizePool implements AutoCloseable {
  /** Tokenizations that may wait for a thread. */
  static final int QUEUE = 256;

  private final ThreadPoolExecutor pool;
  private final AtomicInteger active = new AtomicInteger();

  TokenizePool(int threads) {
    AtomicInteger n = new AtomicInteger();
    pool =
        new ThreadPoolExecutor(
            threads,
            threads,
            30,
            TimeUnit.SECONDS,
            new ArrayBlockingQueue<>(QUEUE),
            r -> {
              Thread t = new Thread(r, "kvrouter-tokenize-" + n.incrementAndGet());
              t.setDaemon(true);
              return t;
            });
    pool.allowCoreThreadTimeOut(true);
  }

  /** Tokenizations submitted and not yet done. */
  int active() {
    return active.get();
  }

  /**
   * Runs {@code w} on the pool and waits for it.
   *
   * @throws OpenAiError 429 when the pool and its queue are full
   * @throws RuntimeException what {@code w} throws (a TokenizerException among them)
   */
  <T> T run(Supplier<T> w) {
    Future<T> f;
    active.incrementAndGet();
    try {
      f =
          pool.submit(
              () -> {
                try {
                  return w.get();
                } finally {
                  active.decrementAndGet();
                }
              });
    } catch (RejectedExecutionException e) {
      active.decrementAndGet();
      throw new OpenAiError(
          429,
          "server_error",
          "tokenizer_busy",
          null,
          "the gateway's tokenizers are busy ("
              + pool.getMaximumPoolSize()
              + " tokenizing, "
              + QUEUE
              + " waiting); retry shortly");
    }
    try {
      return f.get();
    } catch (InterruptedException e) {
      f.cancel(true);
      Thread.currentThread().interrupt();
      throw new IllegalStateException("interrupted while tokenizing", e);
    } catch (ExecutionException e) {
      Throwable c = e.getCause();
      if (c instanceof RuntimeException re) throw re;
      if (c instanceof Error err) throw err;
      throw new IllegalStateException(c);
    }
  }

  @Override
  public void close() {
    pool.shutdownNow();
  }
}
