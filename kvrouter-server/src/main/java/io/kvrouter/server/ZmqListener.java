package io.kvrouter.server;

import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import io.kvrouter.hash.BlockHasher;
import io.kvrouter.index.Tier;
import io.kvrouter.server.http.ApiException;
import io.kvrouter.transport.kvevents.ClearScope;
import io.kvrouter.transport.kvevents.GroupEvent;
import io.kvrouter.transport.kvevents.StorageTier;
import io.kvrouter.transport.zmq.EngineSpec;
import io.kvrouter.transport.zmq.IngestSink;
import io.kvrouter.transport.zmq.IngestStats;
import io.kvrouter.transport.zmq.ZmqEventSubscriber;
import io.prometheus.metrics.core.datapoints.CounterDataPoint;
import java.time.Duration;
import java.util.Locale;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.logging.Logger;

/**
 * The ZMQ subscriber of one registered worker rank: connects to the engine's PUB endpoint (and
 * replay endpoint) given to {@code POST /register} and applies the rank's KV events to its index.
 *
 * <pre>
 * Implementation notes
 *
 * Life: start() (on the /register request's thread) validates the endpoints and starts a
 * ZmqEventSubscriber in connect mode, which owns its own platform thread and sockets. The
 * registration is made only after that, so the subscriber thread may receive events before the
 * rank exists in the index: the sink then waits (on attached, in 50 ms slices) until attach()
 * names the index and registration, or cancel() says the registration failed. Live messages
 * queue in the SUB socket meanwhile. close() stops the subscriber (joins its thread).
 *
 * Who writes what: the subscriber thread alone runs the sink and writes dropped[] (plain read,
 * release store; other threads read with acquire). target and registration are written once by
 * the registering thread before attached is counted down (the latch is the happens-before edge).
 * firstConnected is a volatile set by whichever thread first sees a completed connection.
 *
 * Events of every tier (device, and the host / disk / external copies of offloading engines) are
 * applied through ModelIndex.applyFrom, under the index's read lock, only while this
 * exact Registration is the registered one: an unregister (write lock) therefore cannot leave
 * blocks behind, and a late event of a removed rank is counted in dropped[UNREGISTERED]. Events
 * of another (instance, rank) than the registered one (an engine publishing a
 * data_parallel_rank other than its registration's) are dropped and counted, never applied:
 * the index holds only ranks a gateway can route to.
 * </pre>
 */
final class ZmqListener implements AutoCloseable {
  private static final Logger LOG = Logger.getLogger(ZmqListener.class.getName());
  static final int FOREIGN_RANK = 0;
  static final int UNREGISTERED = 1;
  static final int APPLIED = 2;

  /** The index's tier of each transport tier (the same constants in the same order). */
  private static final Tier[] TIERS = new Tier[StorageTier.values().length];

  static {
    for (StorageTier t : StorageTier.values()) TIERS[t.ordinal()] = Tier.valueOf(t.name());
  }

  private final Worker worker;
  private final String endpoint;
  private final String topic;
  private final ZmqEventSubscriber subscriber;
  private final long startedNanos = System.nanoTime();
  private final CountDownLatch attached = new CountDownLatch(1);
  private final AtomicLongArray counts = new AtomicLongArray(3);
  private final CounterDataPoint received;
  private ModelIndex target;
  private Registration registration;
  private volatile boolean cancelled;
  private volatile boolean firstConnected;

  private ZmqListener(
      Worker worker,
      String endpoint,
      String replay,
      String topic,
      int engineBlockSize,
      int routerBlockSize,
      ClearScope clearScope,
      CounterDataPoint received) {
    this.worker = worker;
    this.endpoint = endpoint;
    this.topic = topic;
    this.received = received;
    EngineSpec spec =
        new EngineSpec(
            worker.workerId(), topic, engineBlockSize, replay, worker.dpRank(), clearScope);
    this.subscriber =
        ZmqEventSubscriber.connect(endpoint, spec)
            .routerHasher(BlockHasher.of(routerBlockSize))
            .sink(
                new IngestSink() {
                  @Override
                  public void accept(StorageTier tier, RouterEvent e) {
                    ZmqListener.this.accept(tier, e);
                  }

                  @Override
                  public void acceptGroup(GroupEvent g) {
                    ZmqListener.this.acceptGroup(g); // a hybrid model's KV cache groups
                  }
                })
            .start();
  }

  /**
   * Validates the endpoints and starts the subscriber.
   *
   * @param engineBlockSize the engine's tokens per block, a multiple of {@code routerBlockSize}
   * @param routerBlockSize the index's tokens per block
   * @param clearScope the tiers the engine's {@code AllBlocksCleared} empties
   * @param received the {@code kvrouter_events_received_total{source="zmq"}} counter
   * @throws ApiException 400 naming the field when an endpoint is not one the router can connect to
   */
  static ZmqListener start(
      Worker worker,
      String endpoint,
      String replay,
      String topic,
      int engineBlockSize,
      int routerBlockSize,
      ClearScope clearScope,
      CounterDataPoint received) {
    checkEndpoint("endpoint", endpoint);
    if (replay != null) checkEndpoint("replay_endpoint", replay);
    try {
      return new ZmqListener(
          worker, endpoint, replay, topic, engineBlockSize, routerBlockSize, clearScope, received);
    } catch (RuntimeException e) {
      throw ApiException.badRequest(
          "endpoint: ZMQ cannot connect to '"
              + endpoint
              + "'"
              + (replay == null ? "" : " (replay_endpoint '" + replay + "')")
              + ": "
              + e.getMessage()
              + "; nothing was registered");
    }
  }

  /**
   * Checks that {@code value} is an address the router can connect to: {@code tcp://host:port} with
   * a concrete host and a port in 1..65535, or {@code ipc://path}.
   */
  static void checkEndpoint(String field, String value) {
    String v = value.trim();
    if (v.startsWith("ipc://") && v.length() > "ipc://".length()) return;
    if (!v.startsWith("tcp://")) {
      throw ApiException.badRequest(
          field
              + ": '"
              + value
              + "' is not a ZMQ address the router can connect to; expected tcp://host:port"
              + " (or ipc://path)");
    }
    String rest = v.substring("tcp://".length());
    int colon = rest.lastIndexOf(':');
    String host = colon < 0 ? "" : rest.substring(0, colon);
    String port = colon < 0 ? "" : rest.substring(colon + 1);
    if (host.isEmpty() || port.isEmpty()) {
      throw ApiException.badRequest(
          field + ": '" + value + "' needs a host and a port, e.g. tcp://10.0.0.5:5557");
    }
    if (host.equals("*") || host.equals("0.0.0.0") || host.equals("[::]") || host.equals("::")) {
      throw ApiException.badRequest(
          field
              + ": '"
              + value
              + "' is the engine's bind address; register the address the router connects to"
              + " (the engine's host, e.g. tcp://10.0.0.5:"
              + port
              + ")");
    }
    int p;
    try {
      p = Integer.parseInt(port);
    } catch (NumberFormatException e) {
      p = -1;
    }
    if (p < 1 || p > 65535) {
      throw ApiException.badRequest(
          field + ": '" + value + "' has port '" + port + "'; expected 1..65535");
    }
  }

  /**
   * Waits until the subscriber completed its first connection (ZMTP handshake) with the engine.
   *
   * @return false when {@code timeout} passed first
   */
  boolean awaitConnected(Duration timeout) throws InterruptedException {
    long deadline = System.nanoTime() + timeout.toNanos();
    while (!connectedOnce()) {
      if (System.nanoTime() - deadline >= 0) return false;
      Thread.sleep(5);
    }
    return true;
  }

  /** The rank is registered: events go to {@code m} from now on. */
  void attach(ModelIndex m, Registration r) {
    this.target = m;
    this.registration = r;
    attached.countDown();
  }

  /** The registration failed: drop whatever came and stop. */
  void cancel() {
    cancelled = true;
    attached.countDown();
    close();
  }

  /** Stops the subscriber and its sockets (within about 50 ms). Idempotent. */
  @Override
  public void close() {
    cancelled = true;
    attached.countDown();
    subscriber.close();
  }

  /** Whether a connection to the engine ever completed. */
  boolean connectedOnce() {
    if (firstConnected) return true;
    if (subscriber.stats().connections() > 0) firstConnected = true;
    return firstConnected;
  }

  /** Nanoseconds since start, for the readiness grace period. */
  long ageNanos() {
    return System.nanoTime() - startedNanos;
  }

  /**
   * {@code connecting} until the first connection completes, then {@code connected} while there are
   * more completed connections than disconnections, else {@code disconnected} (ZMQ is reconnecting
   * with backoff).
   */
  String state() {
    IngestStats s = subscriber.stats();
    if (s.connections() == 0) return "connecting";
    return s.connections() > s.disconnects() ? "connected" : "disconnected";
  }

  IngestStats stats() {
    return subscriber.stats();
  }

  /** The sequence number of the engine's last batch dealt with, -1 before the first. */
  long lastSequence() {
    return subscriber.lastSequence(topic);
  }

  /**
   * Seconds since the engine's last live message (its staleness), -1 before the first. Nothing in
   * vLLM's protocol announces an engine's last sequence: a silent engine and one whose last
   * messages were lost look alike, except through the tail probe (IngestStats.tailRecovered).
   */
  double secondsSinceLastMessage() {
    long n = subscriber.nanosSinceLastMessage(topic);
    return n < 0 ? -1 : n / 1e9;
  }

  /** Events dropped because their rank was not this registration's. */
  long droppedForeignRank() {
    return counts.getAcquire(FOREIGN_RANK);
  }

  /** Events dropped because the rank was unregistered meanwhile. */
  long droppedUnregistered() {
    return counts.getAcquire(UNREGISTERED);
  }

  /** Events applied to the index. */
  long applied() {
    return counts.getAcquire(APPLIED);
  }

  Worker worker() {
    return worker;
  }

  String endpoint() {
    return endpoint;
  }

  String topic() {
    return topic;
  }

  // ------------------------------------------------------------ the subscriber's thread

  private void accept(StorageTier tier, RouterEvent e) {
    if (!awaitAttached()) return;
    if (!e.worker().equals(worker)) {
      long n = bump(FOREIGN_RANK);
      if (n <= 10 || n % 1000 == 0) {
        LOG.warning(
            String.format(
                Locale.ROOT,
                "ZMQ %s: an event of instance %s dp_rank %d arrived on the endpoint registered"
                    + " for dp_rank %d; dropped (%d so far). Register each rank with its own"
                    + " endpoint.",
                endpoint,
                Long.toUnsignedString(e.worker().workerId()),
                e.worker().dpRank(),
                worker.dpRank(),
                n));
      }
      return;
    }
    if (target.applyFrom(registration, TIERS[tier.ordinal()], e)) {
      bump(APPLIED);
      received.inc();
    } else {
      bump(UNREGISTERED);
    }
  }

  /** A secondary KV cache group's event (docs/routing.md, "Hybrid models"), for this rank only. */
  private void acceptGroup(GroupEvent g) {
    if (!awaitAttached() || !g.event().worker().equals(worker)) return;
    target.applyGroupFrom(registration, g);
  }

  private boolean awaitAttached() {
    try {
      while (!attached.await(50, TimeUnit.MILLISECONDS)) {
        if (cancelled) return false;
      }
    } catch (InterruptedException x) {
      Thread.currentThread().interrupt();
      return false;
    }
    return target != null; // written before the latch opened
  }

  private long bump(int i) {
    long v = counts.getPlain(i) + 1;
    counts.setRelease(i, v);
    return v;
  }
}
