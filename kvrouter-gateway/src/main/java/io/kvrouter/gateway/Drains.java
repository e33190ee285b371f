package io.kvrouter.gateway;

import io.kvrouter.event.Worker;
import io.kvrouter.server.RouterModel;
import io.kvrouter.server.ServerHost;
import java.time.Duration;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.logging.Logger;

/**
 * Takes engine ranks out gently: no new request is routed to the rank's engine, the requests in
 * flight on it finish (up to a bound), then the rank is unregistered ({@link Gateway#drain}).
 *
 * <pre>
 * Implementation notes
 *
 * drain() runs on the caller's thread up to marking the engine's EngineState draining (routing
 * skips it from then on: EngineState.usable), then hands the waiting to one daemon thread
 * ("kvrouter-gateway-drain") that looks every POLL at the rank's requests in flight, which the
 * router counts (KvRouter.load(worker).requests(): every request routed to the rank and not freed
 * yet; the gateway frees each one when its answer ends). At 0, or once the bound passed, it
 * unregisters the rank (ServerHost.unregister, as POST /unregister), ends the EngineState's drain
 * and completes the future with the requests that were still in flight (0: drained). A drain
 * whose rank is already gone completes at once. pending holds the futures not completed, so that
 * close() fails them rather than leaving their callers waiting.
 * </pre>
 */
final class Drains implements AutoCloseable {
  private static final Logger LOG = Gateway.LOG;
  private static final long POLL_MS = 50;

  private final ScheduledThreadPoolExecutor timer;
  private final Set<CompletableFuture<Integer>> pending = ConcurrentHashMap.newKeySet();

  Drains() {
    timer =
        new ScheduledThreadPoolExecutor(
            1,
            r -> {
              Thread t = new Thread(r, "kvrouter-gateway-drain");
              t.setDaemon(true);
              return t;
            });
    timer.setRemoveOnCancelPolicy(true);
  }

  /**
   * Drains {@code worker} of {@code model} (routing group {@code group}, null: the default).
   *
   * @return completes with the requests still in flight when the rank was unregistered
   */
  @SuppressWarnings("CollectionUndefinedEquality") // pending's members are told apart by identity
  CompletableFuture<Integer> drain(
      ServerHost host, Engines engines, String model, String group, Worker worker, Duration bound) {
    CompletableFuture<Integer> done = new CompletableFuture<>();
    RouterModel m = host.model(model, group);
    if (m == null || !registered(m, worker)) {
      done.complete(0); // not registered (any more)
      return done;
    }
    String url = m.baseUrl(worker);
    EngineState st = url == null ? null : engines.engine(url);
    if (st != null) st.drainStarted();
    pending.add(done);
    long deadline = System.nanoTime() + bound.toNanos();
    Runnable[] poll = new Runnable[1];
    poll[0] =
        () -> {
          int n = inFlight(m, worker);
          if (n > 0 && System.nanoTime() - deadline < 0) {
            schedule(poll[0], done);
            return;
          }
          try {
            unregister(host, model, group, worker);
            if (n > 0) {
              LOG.warning(
                  "drain of "
                      + url
                      + " (model "
                      + model
                      + ", "
                      + Gateway.describe(worker)
                      + "): "
                      + n
                      + " request(s) still in flight after "
                      + bound.toMillis()
                      + " ms; unregistered anyway (their answers keep streaming)");
            }
            done.complete(n);
          } catch (RuntimeException e) {
            done.completeExceptionally(e);
          } finally {
            if (st != null) st.drainEnded();
            pending.remove(done);
          }
        };
    schedule(poll[0], done);
    return done;
  }

  private static boolean registered(RouterModel m, Worker w) {
    for (RouterModel.Rank r : m.ranks()) {
      if (r.worker().equals(w)) return true;
    }
    return false;
  }

  @SuppressWarnings("CollectionUndefinedEquality") // pending's members are told apart by identity
  private void schedule(Runnable poll, CompletableFuture<Integer> done) {
    try {
      // the poll completes done itself; its own future has nothing to tell
      ScheduledFuture<?> unused = timer.schedule(poll, POLL_MS, TimeUnit.MILLISECONDS);
    } catch (RejectedExecutionException e) {
      pending.remove(done);
      done.completeExceptionally(new IllegalStateException("the gateway is stopping", e));
    }
  }

  /** The rank's requests in flight (0 when it is no longer registered). */
  private static int inFlight(RouterModel m, Worker w) {
    try {
      return m.router().load(w).requests();
    } catch (IllegalArgumentException gone) {
      return 0;
    }
  }

  private static void unregister(ServerHost host, String model, String group, Worker w) {
    try {
      host.unregister(model, group, w.workerId(), w.dpRank());
    } catch (ServerHost.HttpError e) {
      if (e.status() != 404) throw e; // 404: unregistered meanwhile (POST /unregister)
    }
  }

  /** Stops the timer; drains not finished fail. */
  @Override
  public void close() {
    timer.shutdownNow();
    for (CompletableFuture<Integer> f : pending) {
      f.completeExceptionally(new IllegalStateException("the gateway stopped"));
    }
    pending.clear();
  }
}
