package io.kvrouter.gateway;

import com.google.errorprone.annotations.concurrent.GuardedBy;
import io.kvrouter.admission.FairQueue;
import io.kvrouter.server.RouterModel;
import java.util.Collection;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Consumer;
import org.jspecify.annotations.Nullable;

/**
 * The queue in front of a saturated model (docs/gateway.md, "Admission"): a request whose every
 * engine is busy (the router answered {@code AllBusy}) waits here, in a {@link FairQueue} per
 * model, until a request of that model finishes; what cannot wait is refused with 429.
 *
 * <pre>
 * Implementation notes
 *
 * Data: one ModelQueue per RouterModel (a ConcurrentHashMap, made on a model's first request,
 * dropped by retain() once the model is gone and its queue empty),
 * each with its FairQueue of Waiters, frees (an AtomicLong counting the model's freed routes) and
 * waiting (an AtomicInteger: requests queued, about to queue, or granted and not yet routed). One
 * ReentrantLock, lock, guards every FairQueue, every Waiter's state and the queue metrics; each
 * Waiter has its own Condition of lock.
 *
 * Who writes: the request's own thread offers (enter) and, when it times out, cancels; freed()
 * (the thread that freed a route) polls the next waiter and grants it; the client watch's thread
 * cancels a waiter whose client left. A granted waiter routes again outside the lock; until it has,
 * waiting still counts it, so that a new request does not take the place it was granted.
 *
 * The hot path (a model that is not saturated): one map lookup per request, and per freed route an
 * increment of frees and a read of waiting; the lock is taken only while something waits.
 *
 * No lost wake-up: a request that found every engine busy read frees before it routed; under the
 * lock it increments waiting, then re-reads frees: if a route was freed since, it routes again
 * instead of queuing. freed() increments frees, then reads waiting. Both are sequentially
 * consistent (atomics), so either the request sees the new count or freed() sees the waiter and
 * takes the lock (which the request holds until it is queued).
 * </pre>
 */
final class Admission {
  /** The priority bands: high (priority below 0), normal (0 or none), low (above 0). */
  static final int BANDS = 3;

  static final String[] BAND_NAMES = {"high", "normal", "low"};

  /** What {@link ModelQueue#await} ended with. */
  enum Outcome {
    /** Route again now: a route of the model was freed since the request's route. */
    RETRY,
    /** The request was granted a place: route it (then call {@link ModelQueue#routed}). */
    GRANTED,
    /** The client left while queued: answer nothing. */
    GONE
  }

  private final AdmissionConfig config;
  private final GatewayMetrics.AdmissionMetrics metrics;
  private final ReentrantLock lock = new ReentrantLock();
  private final Map<RouterModel, ModelQueue> queues = new ConcurrentHashMap<>();

  Admission(AdmissionConfig config, GatewayMetrics.AdmissionMetrics metrics) {
    this.config = config;
    this.metrics = metrics;
  }

  AdmissionConfig config() {
    return config;
  }

  /** The queue of {@code m}, made on first use; null when admission is off. */
  @Nullable ModelQueue queue(RouterModel m) {
    if (!config.queues()) return null;
    ModelQueue q = queues.get(m);
    return q != null ? q : queues.computeIfAbsent(m, k -> new ModelQueue(k.modelName()));
  }

  /**
   * Requests waiting for {@code m} now (GET /dashboard), or -1 when admission is off; takes the
   * lock briefly.
   */
  int depth(RouterModel m) {
    if (!config.queues()) return -1;
    ModelQueue q = queues.get(m);
    return q == null ? 0 : q.size();
  }

  /**
   * Drops the queues of models no longer served that have nothing waiting (the health round calls
   * it, Gateway.prune), so that models that come and go leave nothing behind.
   */
  void retain(Collection<RouterModel> live) {
    Set<RouterModel> keep = Collections.newSetFromMap(new IdentityHashMap<>());
    keep.addAll(live);
    queues.entrySet().removeIf(e -> !keep.contains(e.getKey()) && !e.getValue().busy());
  }

  /**
   * A request of {@code tenant} was refused by its token-rate limit (TenantRates): counted under
   * the tenant's capped label. Takes the lock briefly (the label set is guarded by it).
   */
  void rateLimited(String tenant) {
    lock.lock();
    try {
      metrics.rateLimited.labelValues(metrics.tenantLabel(tenant)).inc();
    } finally {
      lock.unlock();
    }
  }

  /** The band of a priority: below 0 high, 0 normal, above 0 low (vLLM: lower is earlier). */
  static int band(long priority) {
    return priority < 0 ? 0 : priority == 0 ? 1 : 2;
  }

  /** One waiting request; its state is guarded by the lock. */
  static final class Waiter {
    final int band;
    final String tenant;
    final String tenantLabel;
    final double cost;
    final long arrivalNanos;
    final Condition wake;
    FairQueue.@Nullable Ticket<Waiter> ticket; // null: the queue was full
    @Nullable Outcome state; // null while queued

    private Waiter(
        int band, String tenant, String label, double cost, long arrival, Condition wake) {
      this.band = band;
      this.tenant = tenant;
      this.tenantLabel = label;
      this.cost = cost;
      this.arrivalNanos = arrival;
      this.wake = wake;
    }
  }

  /** The admission state of one model (its queue, its counts). */
  final class ModelQueue {
    final String model;

    @GuardedBy("Admission.this.lock")
    private final FairQueue<Waiter> queue;

    private final AtomicLong frees = new AtomicLong();
    private final AtomicInteger waiting = new AtomicInteger();

    ModelQueue(String model) {
      this.model = model;
      this.queue =
          new FairQueue<>(
              new FairQueue.Config(
                  BANDS,
                  config.maxQueueDepth(),
                  config.maxQueueTime().toNanos(),
                  config.starvationLimit()));
    }

    /** The count of freed routes: read it before routing, pass it to {@link #await}. */
    long generation() {
      return frees.get();
    }

    /** Whether requests wait (or hold a place not yet routed): a new one queues behind them. */
    boolean busy() {
      return waiting.get() > 0;
    }

    /** A route of this model was freed: the next waiter, if any, is granted its place. */
    void freed() {
      frees.incrementAndGet();
      if (waiting.get() > 0) grantNext();
    }

    /** A granted request has routed (or left without routing: then also call {@link #freed}). */
    void routed() {
      waiting.decrementAndGet();
    }

    /** Requests waiting now. */
    int size() {
      lock.lock();
      try {
        return queue.size();
      } finally {
        lock.unlock();
      }
    }

    private void grantNext() {
      lock.lock();
      try {
        FairQueue.Ticket<Waiter> t = queue.poll();
        if (t == null) return;
        Waiter w = t.item();
        w.state = Outcome.GRANTED;
        metrics.left(model, w.band, w.tenantLabel, System.nanoTime() - w.arrivalNanos);
        w.wake.signal();
      } finally {
        lock.unlock();
      }
    }

    /**
     * Waits for a place: returns GRANTED (route now, then {@link #routed}), RETRY (a route was
     * freed since {@code generation} was read: route again now) or GONE (the client left).
     *
     * @param generation what {@link #generation()} said before the route that found every engine
     *     busy; -1 for a request that queues behind others without having routed
     * @param watch called once the request is queued, to watch its client (returns whether it can);
     *     its callback is {@link #gone}
     * @throws OpenAiError 429 when the queue is full or the wait reached its bound
     */
    Outcome await(
        long generation,
        int band,
        String tenant,
        double cost,
        long arrivalNanos,
        Consumer<Waiter> watch) {
      String label;
      Waiter w;
      lock.lock();
      try {
        waiting.incrementAndGet();
        if (generation >= 0 && frees.get() != generation) {
          waiting.decrementAndGet();
          return Outcome.RETRY;
        }
        label = metrics.tenantLabel(tenant);
        w = new Waiter(band, tenant, label, cost, arrivalNanos, lock.newCondition());
        w.ticket = queue.offer(w, band, tenant, config.weight(tenant), cost, arrivalNanos);
        if (w.ticket == null) {
          waiting.decrementAndGet();
          metrics.rejected(model, band, label, "queue_full");
          throw refusal(
              "queue_full",
              "model '"
                  + model
                  + "' is saturated and "
                  + config.maxQueueDepth()
                  + " requests wait for it already (--max-queue-depth); retry later");
        }
        metrics.entered(model, band, label);
      } finally {
        lock.unlock();
      }
      watch.accept(w);
      long deadline = arrivalNanos + config.maxQueueTime().toNanos();
      lock.lock();
      try {
        while (w.state == null) {
          long left = deadline - System.nanoTime();
          if (left <= 0) {
            queue.cancel(w.ticket);
            waiting.decrementAndGet();
            metrics.left(model, band, label, System.nanoTime() - arrivalNanos);
            metrics.rejected(model, band, label, "queue_timeout");
            throw refusal(
                "queue_timeout",
                "model '"
                    + model
                    + "' stayed saturated for "
                    + config.maxQueueTime().toMillis()
                    + " ms while the request waited (--max-queue-time); retry later");
          }
          try {
            w.wake.awaitNanos(left);
          } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            leave(w);
            return Outcome.GONE;
          }
        }
        return w.state;
      } finally {
        lock.unlock();
      }
    }

    /** The client of {@code w} left: it leaves the queue at once (nothing when granted already). */
    void gone(Waiter w) {
      lock.lock();
      try {
        if (w.state == null) {
          leave(w);
          w.wake.signal();
        }
      } finally {
        lock.unlock();
      }
    }

    /** Under the lock: a queued waiter leaves without a place. */
    @GuardedBy("Admission.this.lock")
    private void leave(Waiter w) {
      if (w.state != null) return;
      w.state = Outcome.GONE;
      queue.cancel(w.ticket);
      waiting.decrementAndGet();
      metrics.left(model, w.band, w.tenantLabel, System.nanoTime() - w.arrivalNanos);
      metrics.cancelled(model, w.band, w.tenantLabel);
    }

    /**
     * The engine reported what a queued request really cost: {@code delta} cost units (actual
     * uncached prefill tokens less the predicted) go onto its tenant's next request.
     */
    void charge(Waiter w, double delta) {
      lock.lock();
      try {
        queue.charge(w.band, w.tenant, delta);
      } finally {
        lock.unlock();
      }
    }
  }

  /** The 429 of a request the queue cannot hold, with the queue's bound as its Retry-After. */
  OpenAiError refusal(String code, String message) {
    return new OpenAiError(429, "requests", code, null, message);
  }

  /** Retry-After, in whole seconds: the queue's wait bound, at least 1. */
  long retryAfterSeconds() {
    long ns = config.maxQueueTime().toNanos();
    return Math.max(1, TimeUnit.NANOSECONDS.toSeconds(ns + TimeUnit.SECONDS.toNanos(1) - 1));
  }
}
