package io.kvrouter.gateway;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.kvrouter.event.Worker;
import io.kvrouter.route.KvRouter;
import io.kvrouter.route.RouteDecision;
import io.kvrouter.route.RoutingSettings;
import io.kvrouter.route.WorkerLoad;
import io.prometheus.metrics.model.registry.PrometheusRegistry;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import org.jspecify.annotations.Nullable;
import org.junit.jupiter.api.Test;

/**
 * The wake-up protocol of {@link Admission.ModelQueue} without HTTP: a route freed between a
 * request's route and its queuing sends it back to route at once (no lost wake-up), a freed route
 * grants the first waiter in the queue's order, a waiter whose client left leaves at once, a full
 * queue refuses, and a request parked for a prefix holder that can no longer be waited for
 * (unregistered, or at its request limit) is sent back to route. Waiters run on virtual threads;
 * every step waits on the queue's state.
 */
class AdmissionTest {
  private final GatewayMetrics metrics = new GatewayMetrics(new PrometheusRegistry(), List::of, 4);

  private Admission.ModelQueue queue(int depth) {
    Admission a =
        new Admission(
            new AdmissionConfig(
                depth,
                Duration.ofMinutes(10),
                0,
                AdmissionConfig.TenantSource.HEADER,
                Map.of(),
                16,
                4),
            metrics.admission);
    return a.new ModelQueue("m");
  }

  private static void await(String what, BooleanSupplier cond) {
    long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
    while (!cond.getAsBoolean()) {
      if (System.nanoTime() > deadline) throw new AssertionError("timed out waiting for " + what);
      Thread.onSpinWait();
    }
  }

  private static CompletableFuture<Admission.Outcome> waiter(
      Admission.ModelQueue q, long generation, int band, Admission.Waiter[] seen) {
    CompletableFuture<Admission.Outcome> f = new CompletableFuture<>();
    Thread.ofVirtual()
        .start(
            () -> {
              try {
                f.complete(q.await(generation, band, "t", 10, System.nanoTime(), w -> seen[0] = w));
              } catch (Throwable e) {
                f.completeExceptionally(e);
              }
            });
    return f;
  }

  /**
   * A waiter refused at its bound (an arrival 11 minutes ago against a 10-minute bound: refused at
   * once) whose client's connection then closes (the watch calls gone, as after its 429) leaves the
   * queue once: its depth and the waiting count are not taken down twice, so the next waiter is
   * still granted by a freed route.
   */
  @Test
  void aWaiterRefusedAtItsBoundLeavesOnceEvenWhenItsClientGoesAfterwards() throws Exception {
    Admission.ModelQueue q = queue(4);
    Admission.Waiter[] seen = new Admission.Waiter[1];
    long longAgo = System.nanoTime() - Duration.ofMinutes(11).toNanos();
    assertThatThrownBy(() -> q.await(-1, 1, "t", 10, longAgo, w -> seen[0] = w))
        .isInstanceOf(OpenAiError.class)
        .hasMessageContaining("--max-queue-time");
    q.gone(seen[0]); // the 429 is out and the client's connection closes
    assertThat(metrics.admission.depth.labelValues("m", "normal", "t").get()).isZero();
    assertThat(metrics.admission.cancelled.labelValues("m", "normal", "t").get()).isZero();
    assertThat(metrics.admission.rejections.labelValues("m", "normal", "t", "queue_timeout").get())
        .isEqualTo(1);
    assertThat(q.busy()).isFalse();

    Admission.Waiter[] next = new Admission.Waiter[1];
    CompletableFuture<Admission.Outcome> b = waiter(q, -1, 1, next);
    await("b queued", () -> q.size() == 1);
    assertThat(q.busy()).isTrue();
    q.freed();
    assertThat(b.get(30, TimeUnit.SECONDS)).isEqualTo(Admission.Outcome.GRANTED);
  }

  @Test
  void aRouteFreedSinceTheRequestRoutedSendsItBackAtOnce() {
    Admission.ModelQueue q = queue(4);
    long before = q.generation();
    q.freed(); // a request finished between the route that found every engine busy and the queue
    assertThat(q.await(before, 1, "t", 10, System.nanoTime(), w -> {}))
        .isEqualTo(Admission.Outcome.RETRY);
    assertThat(q.size()).isZero();
    assertThat(q.busy()).isFalse();
  }

  @Test
  void aFreedRouteGrantsTheHighestBandFirstAndAGrantedOneHoldsItsPlaceUntilRouted()
      throws Exception {
    Admission.ModelQueue q = queue(4);
    Admission.Waiter[] low = new Admission.Waiter[1];
    Admission.Waiter[] high = new Admission.Waiter[1];
    CompletableFuture<Admission.Outcome> l = waiter(q, q.generation(), 2, low);
    await("low queued", () -> q.size() == 1);
    CompletableFuture<Admission.Outcome> h = waiter(q, q.generation(), 0, high);
    await("high queued", () -> q.size() == 2);

    q.freed();
    assertThat(h.get(30, TimeUnit.SECONDS)).isEqualTo(Admission.Outcome.GRANTED);
    assertThat(l).isNotDone();
    assertThat(q.size()).isEqualTo(1);
    q.routed(); // the high one routed
    assertThat(q.busy()).as("the low one still waits").isTrue();
    q.freed();
    assertThat(l.get(30, TimeUnit.SECONDS)).isEqualTo(Admission.Outcome.GRANTED);
    assertThat(q.busy()).as("granted, not yet routed: a new request queues behind it").isTrue();
    q.routed();
    assertThat(q.busy()).isFalse();
  }

  /**
   * With the excess rule (factor 4), a tenant that sent five requests against another's one waits
   * behind it: the freed route goes to the light tenant, though the heavy tenant's first request
   * came first with the same tag. Without the rule it goes to the heavy tenant's first request.
   */
  @Test
  void aFreedRouteSkipsATenantThatSentFarMoreWithTheExcessRule() throws Exception {
    for (double factor : new double[] {4, 0}) {
      Admission a =
          new Admission(
              new AdmissionConfig(
                      16,
                      Duration.ofMinutes(10),
                      0,
                      AdmissionConfig.TenantSource.HEADER,
                      Map.of(),
                      16,
                      4)
                  .withExcessFactor(factor),
              metrics.admission);
      Admission.ModelQueue q = a.new ModelQueue("m" + (int) factor);
      List<CompletableFuture<Admission.Outcome>> heavy = new java.util.ArrayList<>();
      for (int i = 0; i < 5; i++) {
        heavy.add(waiter(q, q.generation(), 1, "heavy"));
        int n = i + 1;
        await("heavy queued", () -> q.size() == n);
      }
      CompletableFuture<Admission.Outcome> light = waiter(q, q.generation(), 1, "light");
      await("light queued", () -> q.size() == 6);
      q.freed();
      assertThat(q.size()).isEqualTo(5);
      if (factor > 0) {
        assertThat(light.get(30, TimeUnit.SECONDS)).isEqualTo(Admission.Outcome.GRANTED);
        for (CompletableFuture<Admission.Outcome> h : heavy) assertThat(h).isNotDone();
      } else {
        assertThat(heavy.get(0).get(30, TimeUnit.SECONDS)).isEqualTo(Admission.Outcome.GRANTED);
        assertThat(light).isNotDone();
      }
      for (CompletableFuture<Admission.Outcome> h : heavy) h.cancel(true);
      light.cancel(true);
    }
  }

  private static CompletableFuture<Admission.Outcome> waiter(
      Admission.ModelQueue q, long generation, int band, String tenant) {
    CompletableFuture<Admission.Outcome> f = new CompletableFuture<>();
    Thread.ofVirtual()
        .start(
            () -> {
              try {
                f.complete(q.await(generation, band, tenant, 10, System.nanoTime(), w -> {}));
              } catch (Throwable e) {
                f.completeExceptionally(e);
              }
            });
    return f;
  }

  @Test
  void aWaiterWhoseClientLeftLeavesAtOnceAndAFullQueueRefuses() throws Exception {
    Admission.ModelQueue q = queue(1);
    Admission.Waiter[] seen = new Admission.Waiter[1];
    CompletableFuture<Admission.Outcome> w = waiter(q, q.generation(), 1, seen);
    await("queued", () -> q.size() == 1 && seen[0] != null);
    assertThatThrownBy(() -> q.await(q.generation(), 1, "u", 10, System.nanoTime(), x -> {}))
        .isInstanceOfSatisfying(
            OpenAiError.class,
            e -> {
              assertThat(e.status).isEqualTo(429);
              assertThat(e.code).isEqualTo("queue_full");
            });
    q.gone(seen[0]);
    assertThat(w.get(30, TimeUnit.SECONDS)).isEqualTo(Admission.Outcome.GONE);
    assertThat(q.size()).isZero();
    assertThat(q.busy()).isFalse();
    q.gone(seen[0]); // late (the connection closing after the answer): nothing happens
    assertThat(metrics.admission.cancelled.labelValues("m", "normal", "t").get()).isEqualTo(1);
    q.freed(); // nothing waits: nothing granted
    assertThat(q.size()).isZero();
  }

  // ------------------------------------------------------------------ parked for a holder

  /** Busy as soon as a prefill is in flight; at the request limit with {@code busyRequests}. */
  private static RoutingSettings limits(int busyRequests) {
    return RoutingSettings.DEFAULTS.withBusyPrefillTokens(0).withBusyRequests(busyRequests);
  }

  private Admission.ModelQueue queue(RoutingSettings limits, KvRouter router) {
    Admission a =
        new Admission(
            new AdmissionConfig(
                4, Duration.ofMinutes(10), 0, AdmissionConfig.TenantSource.HEADER, Map.of(), 16, 4),
            limits,
            true,
            metrics.admission,
            (m, w) -> false);
    return a.new ModelQueue("m", router, null);
  }

  /** A router of two ranks, one of them busy with one request's prefill: that rank is returned. */
  private static Worker busyHolder(KvRouter router) {
    router.registerRank(new Worker(1, 0), 4, 1000);
    router.registerRank(new Worker(2, 0), 4, 1000);
    RouteDecision d = router.route("r1", new int[] {1, 2, 3, 4, 5, 6, 7, 8});
    assertThat(d).isInstanceOf(RouteDecision.Routed.class);
    Worker holder = ((RouteDecision.Routed) d).worker();
    assertThat(router.isBusy(router.load(holder))).isTrue();
    return holder;
  }

  /** Parks a request for {@code holder} on a virtual thread: its outcome, once it has one. */
  private static CompletableFuture<Admission.@Nullable Outcome> park(
      Admission.ModelQueue q, Worker holder, WorkerLoad holderLoad, Admission.Waiter[] seen) {
    CompletableFuture<Admission.@Nullable Outcome> f = new CompletableFuture<>();
    long generation = q.generation();
    Thread.ofVirtual()
        .start(
            () -> {
              try {
                // 100 prompt tokens, none on the chosen rank behind a backlog of 1000; 90 on the
                // holder
                f.complete(
                    q.waitForHolder(
                        generation,
                        holder,
                        100,
                        0,
                        1000,
                        90,
                        holderLoad,
                        1,
                        "t",
                        System.nanoTime(),
                        () -> {},
                        w -> seen[0] = w));
              } catch (Throwable e) {
                f.completeExceptionally(e);
              }
            });
    return f;
  }

  @Test
  void aRequestParkedForAHolderThatLeftTheRouterRoutesAgainAtTheNextCheck() throws Exception {
    RoutingSettings limits = limits(4);
    KvRouter router = KvRouter.builder(4).settings(limits).build();
    Worker holder = busyHolder(router);
    Admission.ModelQueue q = queue(limits, router);
    Admission.Waiter[] seen = new Admission.Waiter[1];
    CompletableFuture<Admission.@Nullable Outcome> f = park(q, holder, router.load(holder), seen);
    await("parked", () -> q.parked() == 1 && seen[0] != null);
    q.recheck(Admission.RECHECK); // the holder is registered and busy: it still waits
    assertThat(f).isNotDone();
    assertThat(q.parked()).isEqualTo(1);

    assertThat(router.unregisterRank(holder)).isTrue();
    q.recheck(Admission.RECHECK); // the health round
    assertThat(f.get(30, TimeUnit.SECONDS)).isEqualTo(Admission.Outcome.RETRY);
    assertThat(q.parked()).isZero();
    assertThat(q.busy()).isFalse();
    assertThat(metrics.admission.holderReleases.labelValues("m", "holder_gone").get()).isEqualTo(1);
    assertThat(metrics.admission.holderWaiting.labelValues("m").get()).isZero();
  }

  @Test
  void aRequestParkedForAHolderAtItsRequestLimitRoutesAgainAtOnce() throws Exception {
    RoutingSettings limits = limits(1);
    KvRouter router = KvRouter.builder(4).settings(limits).build();
    Worker holder = busyHolder(router); // its one request: at the limit of 1
    Admission.ModelQueue q = queue(limits, router);
    // the load as read before the holder took that request: waiting looked right then
    WorkerLoad before = new WorkerLoad(holder, 0, 0, 0);
    Admission.Waiter[] seen = new Admission.Waiter[1];
    assertThat(park(q, holder, before, seen).get(30, TimeUnit.SECONDS))
        .isEqualTo(Admission.Outcome.RETRY);
    assertThat(q.parked()).isZero();
    assertThat(q.busy()).isFalse();
    assertThat(metrics.admission.holderReleases.labelValues("m", "holder_at_request_limit").get())
        .isEqualTo(1);
  }
}
