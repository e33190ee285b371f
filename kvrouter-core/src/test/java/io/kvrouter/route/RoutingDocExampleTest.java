package io.kvrouter.route;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import io.kvrouter.hash.BlockHasher;
import io.kvrouter.hash.SequenceHasher;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Consumer;
import java.util.stream.IntStream;
import org.junit.jupiter.api.Test;

/** The ten-line embedding example of docs/routing.md, run as written (with stub gateway calls). */
class RoutingDocExampleTest {
  private final List<Consumer<RouterEvent>> subscribers = new ArrayList<>();
  private final List<Runnable> onFirstToken = new ArrayList<>();
  private final List<Runnable> onFinished = new ArrayList<>();
  private final List<Worker> forwarded = new ArrayList<>();
  private final List<RouteDecision> rejected = new ArrayList<>();

  @Test
  void theEmbeddingExampleRoutesToTheCachedWorkerAndReleasesTheLoad() {
    Subscription kvEvents = subscribers::add;
    String requestId = "req-1";
    int[] promptTokenIds = IntStream.range(0, 64).toArray();
    Object request = new Object();

    // ---- docs/routing.md, "Embedding it in a Java gateway" (keep in step) ----
    KvRouter router = KvRouter.builder(16).build(); // the engines' KV block size
    router.registerWorker(1, 1, 16); // worker id, dp ranks, block size
    router.registerWorker(2, 1, 16);
    kvEvents.subscribe(router::applyEvent); // RouterEvents from the transport
    publishStored(Worker.of(2), promptTokenIds); // (worker 2's engine caches the prompt)
    RouteDecision d = router.route(requestId, promptTokenIds);
    if (d instanceof RouteDecision.Routed r) {
      forward(r.worker(), request); // r.overlapTokens() are cached there
      onFirstToken(() -> router.markPrefillCompleted(requestId));
      onFinished(() -> router.free(requestId)); // also on error and cancel
    } else reply503(d); // AllBusy or NoWorkers
    // ---------------------------------------------------------------------------

    assertThat(forwarded).containsExactly(Worker.of(2));
    assertThat(rejected).isEmpty();
    assertThat(router.load(Worker.of(2))).isEqualTo(new WorkerLoad(Worker.of(2), 4, 0, 1));
    onFirstToken.forEach(Runnable::run);
    onFinished.forEach(Runnable::run);
    assertThat(router.loads()).allSatisfy(l -> assertThat(l.isIdle()).isTrue());
  }

  /** The gateway's event feed. */
  interface Subscription {
    void subscribe(Consumer<RouterEvent> consumer);
  }

  private void publishStored(Worker w, int[] tokens) {
    long[] local = BlockHasher.of(16).localHashes(tokens);
    RouterEvent e =
        new RouterEvent(w, 0, CacheEvent.storedAtRoot(SequenceHasher.sequenceHashes(local), local));
    subscribers.forEach(s -> s.accept(e));
  }

  @SuppressWarnings("UnusedVariable") // the signature of docs/routing.md's example
  private void forward(Worker w, Object request) {
    forwarded.add(w);
  }

  private void onFirstToken(Runnable r) {
    onFirstToken.add(r);
  }

  private void onFinished(Runnable r) {
    onFinished.add(r);
  }

  private void reply503(RouteDecision d) {
    rejected.add(d);
  }
}
