package io.kvrouter.server;

import io.kvrouter.event.Worker;
import io.kvrouter.route.KvRouter;
import io.kvrouter.route.KvSource;
import io.kvrouter.server.http.ApiException;
import io.kvrouter.transport.kvevents.EngineEventConverter;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.concurrent.ConcurrentSkipListMap;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.IntFunction;
import org.jspecify.annotations.Nullable;

/**
 * Every index of the service, one per {@code (model_name, routing_group)}, and the registrations
 * that create and drop them.
 *
 * <pre>
 * Implementation notes
 *
 * indexes is a concurrent sorted map read without a lock by every request. register and
 * unregister are rare and run one at a time under membership (a ReentrantLock, virtual-thread
 * friendly): an index is created by the first registration of its key, which fixes its block
 * size, and dropped (closed, its metric series removed) when its last rank
 * unregisters, so a later registration may choose another block size. Removing a rank takes the
 * index's write lock (see ModelIndex) around the router's unregisterRank and the registration
 * map update.
 *
 * Lock order: membership, then a ModelIndex's lock, then the router's lock, then the index's
 * writer lock. Request paths other than register/unregister never take membership.
 *
 * A registration with a ZMQ endpoint owns a ZmqListener. register() checks first what it can
 * without the engine (block sizes, NATS mode, the 409s), then starts the listener and waits for
 * its first connection outside membership (so a slow engine holds up no other registration),
 * then adds the rank under membership and attaches the listener; on any failure after the start
 * it cancels the listener, so nothing is left behind. unregister() closes it after releasing the
 * index's write lock (its thread may be waiting for the read lock to apply an event, which is
 * then dropped because the registration is gone) and keeps its counters in the metrics while
 * the index lives.
 *
 * With NATS (serve --events nats://...), register() starts the new index's NatsEvents.Feed
 * (snapshot restore and consumer creation: network round trips under membership, which only
 * registrations wait for) before the index is published in the map; the feed is closed before
 * the index's router when the index is dropped or the registry closes. In that mode register()
 * and unregister() change nothing themselves: after the checks they publish to the registration
 * log (NatsRegistrations) and wait for this replica's log thread, which calls applyRegister /
 * applyUnregister for every replica's registrations in stream order, so all replicas (and one
 * restarted later) hold the same ones. A registration equal to the one held (every field of
 * Requests.Register, through Registration.request) is accepted as it is, without publishing.
 *
 * KV source (Registration.kvSource, docs/service.md): decided once per registration by
 * kvSource() before anything else, so that the same request always gives the same registration
 * (the NATS log carries the decided value): the request's kv_source when given, otherwise
 * predicted for a rank with a base_url and no endpoint (an engine the gateway forwards to and
 * that publishes no events) unless the indexes follow NATS (every rank's events are on the
 * stream), and events otherwise. With --approximate every rank is predicted, and an endpoint
 * or an explicit kv_source events is refused.
 *
 * With sequence sync (SequenceSyncs), a new index's NatsSequenceSync is started next to its feed
 * and stored in ModelIndex.sync before the index is published; it is closed (a goodbye to the
 * peers) before the router when the index is dropped or the registry closes.
 * </pre>
 */
final class Registry implements AutoCloseable {
  /** A rank that an unregister removed. */
  record Removed(ModelKey key, Worker worker) {}

  private final ConcurrentSkipListMap<ModelKey, ModelIndex> indexes = new ConcurrentSkipListMap<>();
  private final ReentrantLock membership = new ReentrantLock();
  private final IntFunction<KvRouter> routers;
  private final boolean approximate;
  private int maxRegistrations = Integer.MAX_VALUE;
  private ServerMetrics metrics;
  private @Nullable ServerExtension extension; // told of every registration; null: none
  private NatsEvents nats;
  private NatsRegistrations log;
  private SequenceSyncs syncs;

  /**
   * {@code routers} builds the router of a new index from its block size; {@code approximate}:
   * every rank is tracked by predictions ({@code --approximate}).
   */
  Registry(IntFunction<KvRouter> routers, boolean approximate) {
    this.routers = routers;
    this.approximate = approximate;
  }

  /**
   * {@code r} with its KV source decided (see the implementation notes).
   *
   * @throws ApiException 400 when it asks for events (an endpoint, or kv_source events) of a server
   *     that predicts every rank
   */
  Requests.Register kvSource(Requests.Register r) {
    if (approximate) {
      if (r.endpoint() != null) {
        throw ApiException.badRequest(
            "endpoint: this server predicts every engine's cache (--approximate) and subscribes to"
                + " no KV events; register without endpoint, or start it without --approximate;"
                + " nothing was registered");
      }
      if (r.kvSource() == KvSource.EVENTS) {
        throw ApiException.badRequest(
            "kv_source: events, but this server predicts every engine's cache (--approximate);"
                + " nothing was registered");
      }
      return r.withKvSource(KvSource.PREDICTED);
    }
    if (r.kvSource() == KvSource.PREDICTED && r.endpoint() != null) {
      throw ApiException.badRequest(
          "kv_source: predicted, but an endpoint is given: a rank is tracked by its events or by"
              + " predictions, not both; nothing was registered");
    }
    if (r.kvSource() != null) return r;
    boolean predicted = r.endpoint() == null && r.baseUrl() != null && !natsMode();
    return r.withKvSource(predicted ? KvSource.PREDICTED : KvSource.EVENTS);
  }

  /** The most ranks register() keeps at once (serve --max-registrations); set before serving. */
  void maxRegistrations(int max) {
    this.maxRegistrations = max;
  }

  /**
   * A 429 when {@code worker} would be a new rank past {@link #maxRegistrations}; under membership.
   * Not applied to the NATS log's registrations (every replica must apply the same ones).
   */
  private void checkRoom(ModelKey key, Worker worker) {
    long n = 0;
    for (ModelIndex m : indexes.values()) n += m.registrations.size();
    if (n < maxRegistrations) return;
    ModelIndex m = indexes.get(key);
    if (m != null && m.registrations.containsKey(worker)) return; // the 409 says why
    if (metrics != null) metrics.registrationRefused("limit");
    throw new ApiException(
        429,
        n
            + " ranks are registered, the most this server keeps (--max-registrations "
            + maxRegistrations
            + "); unregister some first (POST /unregister); nothing was registered");
  }

  /** The extension told of every registration (ServerExtension.registered), or null. */
  void extension(ServerExtension extension) {
    this.extension = extension;
  }

  /** Connects the metrics (they read this registry, so they are made after it). */
  void metrics(ServerMetrics metrics) {
    this.metrics = metrics;
  }

  /** With {@code serve --events nats://...}: every new index follows its NATS subject. */
  void nats(NatsEvents nats) {
    this.nats = nats;
  }

  /** With sequence sync: every new index shares its in-flight bookkeeping with the peers. */
  void syncs(SequenceSyncs syncs) {
    this.syncs = syncs;
  }

  /**
   * With NATS: registrations and unregistrations go through the stream's registration log, which
   * calls {@link #applyRegister} and {@link #applyUnregister} on every replica.
   */
  void log(NatsRegistrations log) {
    this.log = log;
  }

  /** Whether indexes are fed from NATS (then /events publishes and ZMQ endpoints are refused). */
  private boolean natsMode() {
    return nats != null;
  }

  /** The live indexes, ordered by key. */
  Collection<ModelIndex> indexes() {
    return indexes.values();
  }

  /** The index of {@code key}, or null. */
  ModelIndex get(ModelKey key) {
    return indexes.get(key);
  }

  /** The index of {@code key}, or a 404 that names it. */
  ModelIndex require(ModelKey key) {
    ModelIndex m = indexes.get(key);
    if (m == null) {
      throw ApiException.notFound(
          "unknown "
              + key.describe()
              + ": no worker is registered for it (POST /register creates it)");
    }
    return m;
  }

  /** The live indexes that {@code filter} matches, ordered by key. */
  List<ModelIndex> indexes(Requests.Filter filter) {
    List<ModelIndex> out = new ArrayList<>();
    for (ModelIndex m : indexes.values()) {
      if (filter.matches(m.key)) out.add(m);
    }
    return out;
  }

  /**
   * Marks prefill complete ({@code prefill}) or frees request {@code requestId} in every index
   * {@code filter} matches that has it in flight (request ids are the gateway's).
   *
   * @throws ApiException 404 when no such index has it in flight
   */
  void requestDone(String requestId, Requests.Filter filter, boolean prefill) {
    boolean found = false;
    for (ModelIndex m : indexes.values()) {
      if (!filter.matches(m.key)) continue;
      found |= prefill ? m.router.markPrefillCompleted(requestId) : m.router.free(requestId);
    }
    if (!found) {
      throw ApiException.notFound(
          "request '" + requestId + "' is not in flight (never routed, already freed, or expired)");
    }
  }

  /**
   * Registers one rank; with an endpoint, first starts its ZMQ listener and waits up to {@code
   * connectWait} (zero: not at all) for its first connection. Creates the index on the first
   * registration of its key. Nothing is registered when it fails.
   *
   * @throws ApiException 400 for an endpoint the router cannot use or cannot connect to in time, an
   *     engine block size that is not a multiple of the block size, or an endpoint in NATS mode;
   *     409 when the index uses another block size or the rank is registered; 503 when NATS cannot
   *     be followed
   */
  ModelIndex register(Requests.Register request, Duration connectWait) {
    Requests.Register r = kvSource(request);
    try {
      EngineEventConverter.checkBlockSizes(r.engineBlockSize(), r.blockSize());
    } catch (IllegalArgumentException e) {
      throw ApiException.badRequest("engine_block_size: " + e.getMessage());
    }
    if (r.endpoint() != null && natsMode()) {
      throw ApiException.badRequest(
          "endpoint: this server takes its events from NATS (--events); a ZMQ endpoint here"
              + " would feed this replica alone. Register the rank without an endpoint and"
              + " publish its events to the stream (POST /events to any replica); nothing was"
              + " registered");
    }
    String topic = r.endpoint() == null ? null : (r.topic() == null ? "" : r.topic());
    if (log != null) {
      // NATS: the same registration again is accepted as it is (each replica's gateway may send
      // it); anything else goes through the stream, and every replica applies it in order
      membership.lock();
      try {
        ModelIndex m = identical(r);
        if (m != null) return m;
        check(r.key(), r.blockSize(), r.worker());
        checkRoom(r.key(), r.worker());
      } finally {
        membership.unlock();
      }
      return log.register(r);
    }
    precheck(r.key(), r.blockSize(), r.worker());
    ZmqListener listener = null;
    if (r.endpoint() != null) {
      listener =
          ZmqListener.start(
              r.worker(),
              r.endpoint(),
              r.replayEndpoint(),
              topic,
              r.engineBlockSize(),
              r.blockSize(),
              r.clearScope(),
              metrics.zmqEventsReceived());
      awaitConnection(listener, r.endpoint(), connectWait);
    }
    Registration reg =
        new Registration(
            r.worker(),
            r.endpoint(),
            r.replayEndpoint(),
            topic,
            r.engineBlockSize(),
            r.capacityBlocks(),
            listener,
            r.baseUrl(),
            r.role(),
            r.clearScope(),
            r.kvSource());
    try {
      return add(r.key(), r.blockSize(), reg, true);
    } catch (RuntimeException e) {
      if (listener != null) listener.cancel();
      throw e;
    }
  }

  /**
   * The index where {@code r} (without endpoint) is registered exactly so already, or null.
   * Compares every field of the request ({@link Registration#request}). Under membership: add()
   * publishes an index before its first registration.
   */
  private ModelIndex identical(Requests.Register r) {
    ModelIndex m = indexes.get(r.key());
    if (m == null) return null;
    Registration old = m.registrations.get(r.worker());
    return old != null && old.request(m.key, m.blockSize).equals(r) ? m : null;
  }

  /**
   * Applies a registration read from the NATS registration log (on its thread, on every replica, in
   * stream order): the same registration again is kept as it is; otherwise as {@link #register}
   * without endpoint.
   *
   * @throws ApiException 409 as {@link #register}; 503 when the index's subject cannot be followed
   */
  ModelIndex applyRegister(Requests.Register request) {
    Requests.Register r = kvSource(request);
    membership.lock();
    try {
      ModelIndex m = identical(r);
      if (m != null) return m;
      return add(
          r.key(),
          r.blockSize(),
          new Registration(
              r.worker(),
              r.endpoint(),
              r.replayEndpoint(),
              r.topic(),
              r.engineBlockSize(),
              r.capacityBlocks(),
              null,
              r.baseUrl(),
              r.role(),
              r.clearScope(),
              r.kvSource()),
          false);
    } finally {
      membership.unlock();
    }
  }

  /** Waits for the listener's first connection; cancels it and throws a 400 when none came. */
  private static void awaitConnection(ZmqListener listener, String endpoint, Duration wait) {
    boolean connected;
    try {
      connected = wait.isZero() || listener.awaitConnected(wait);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      connected = false;
    }
    if (!connected) {
      listener.cancel();
      throw ApiException.badRequest(
          "endpoint: no connection to '"
              + endpoint
              + "' within "
              + wait.toMillis()
              + " ms (is the engine running and publishing its KV events there? vLLM: "
              + "--kv-events-config '{\"enable_kv_cache_events\": true, \"publisher\":"
              + " \"zmq\", \"endpoint\": \"tcp://*:PORT\"}'); nothing was registered");
    }
  }

  /**
   * Adds a rank whose listener (if any) is started; creates the index on its first rank. {@code
   * bounded}: refused past {@link #maxRegistrations} (not for the NATS log's registrations).
   */
  private ModelIndex add(ModelKey key, int blockSize, Registration r, boolean bounded) {
    membership.lock();
    try {
      ModelIndex m = check(key, blockSize, r.worker());
      if (bounded) checkRoom(key, r.worker());
      if (m == null) {
        m = new ModelIndex(key, blockSize, routers.apply(blockSize), metrics.findMatches(key));
        if (nats != null) {
          try {
            // through the router, so its eviction-pressure counts see the replicated events
            m.nats = nats.follow(key, m.router.eventFeed());
          } catch (RuntimeException e) {
            m.router.close();
            throw e;
          }
        }
        if (syncs != null) {
          try {
            m.sync = syncs.follow(key, m.router);
          } catch (RuntimeException e) {
            if (m.nats != null) m.nats.close();
            m.router.close();
            throw new ApiException(
                503,
                "cannot share in-flight requests of "
                    + key.describe()
                    + " on NATS ("
                    + syncs.url()
                    + "): "
                    + e.getMessage()
                    + "; nothing was registered");
          }
        }
        indexes.put(key, m);
      }
      m.router.registerRank(r.worker(), blockSize, routerBlocks(r, blockSize), r.kvSource());
      m.registered(r);
      if (r.listener() != null) r.listener().attach(m, r);
      if (extension != null) {
        extension.registered(
            m,
            new RouterModel.Rank(
                r.worker(), r.baseUrl(), r.engineBlockSize(), r.role(), r.kvSource()));
      }
      return m;
    } finally {
      membership.unlock();
    }
  }

  /** The rank's capacity in the index's blocks (an engine block of k router blocks counts k). */
  private static long routerBlocks(Registration r, int blockSize) {
    long split = r.engineBlockSize() / blockSize;
    return r.capacityBlocks() > Long.MAX_VALUE / split
        ? Long.MAX_VALUE
        : r.capacityBlocks() * split;
  }

  /**
   * Checks that {@code worker} could be registered now, so that a registration that will fail does
   * not first wait for its engine's connection.
   *
   * @throws ApiException 409 as {@link #register} would
   */
  private void precheck(ModelKey key, int blockSize, Worker worker) {
    membership.lock();
    try {
      check(key, blockSize, worker);
      checkRoom(key, worker);
    } finally {
      membership.unlock();
    }
  }

  /** The existing index of {@code key} (null: none yet) after the checks; under membership. */
  private ModelIndex check(ModelKey key, int blockSize, Worker worker) {
    ModelIndex m = indexes.get(key);
    if (m != null && m.blockSize != blockSize) {
      throw ApiException.conflict(
          key.describe()
              + " uses block_size "
              + m.blockSize
              + " (fixed by its first registration); this registration asks for "
              + blockSize
              + ": blocks of another size never match"
              + (blockSize % m.blockSize == 0
                  ? " (an engine with "
                      + blockSize
                      + "-token blocks publishing over ZMQ can register with block_size "
                      + m.blockSize
                      + ", engine_block_size "
                      + blockSize
                      + " and its endpoint: its blocks are split)"
                  : ""));
    }
    if (m != null && m.registrations.containsKey(worker)) {
      throw ApiException.conflict(
          "instance "
              + Long.toUnsignedString(worker.workerId())
              + " dp_rank "
              + worker.dpRank()
              + " is already registered for "
              + key.describe()
              + "; unregister it first");
    }
    return m;
  }

  /**
   * Removes the ranks of the instance matching the optional group and rank.
   *
   * @throws ApiException 404 when nothing matched
   */
  List<Removed> unregister(Requests.Unregister u) {
    if (log != null) {
      // NATS: through the stream, so that every replica (and a restarted one) removes the ranks
      if (!matchesAny(u)) throw notRegistered(u);
      return log.unregister(u);
    }
    return applyUnregister(u);
  }

  /** Whether {@code u} names at least one registered rank. */
  private boolean matchesAny(Requests.Unregister u) {
    for (ModelIndex m : indexes.values()) {
      if (!m.key.modelName().equals(u.modelName())) continue;
      if (u.routingGroup() != null && !m.key.routingGroup().equals(u.routingGroup())) continue;
      for (Worker w : m.registrations.keySet()) {
        if (w.workerId() == u.instanceId() && (u.dpRank() < 0 || w.dpRank() == u.dpRank())) {
          return true;
        }
      }
    }
    return false;
  }

  private static ApiException notRegistered(Requests.Unregister u) {
    return ApiException.notFound(
        "instance "
            + Long.toUnsignedString(u.instanceId())
            + (u.dpRank() < 0 ? "" : " dp_rank " + u.dpRank())
            + " is not registered for model '"
            + u.modelName()
            + "'"
            + (u.routingGroup() == null ? "" : " (routing group '" + u.routingGroup() + "')"));
  }

  /**
   * Removes the ranks {@code u} names, here; with NATS, on the registration log's thread.
   *
   * @throws ApiException 404 when nothing matched
   */
  List<Removed> applyUnregister(Requests.Unregister u) {
    String modelName = u.modelName();
    String routingGroup = u.routingGroup();
    long instanceId = u.instanceId();
    int dpRank = u.dpRank();
    membership.lock();
    try {
      List<Removed> out = new ArrayList<>();
      for (ModelIndex m : List.copyOf(indexes.values())) {
        if (!m.key.modelName().equals(modelName)) continue;
        if (routingGroup != null && !m.key.routingGroup().equals(routingGroup)) continue;
        List<Worker> ranks = new ArrayList<>();
        for (Worker w : m.registrations.keySet()) {
          if (w.workerId() == instanceId && (dpRank < 0 || w.dpRank() == dpRank)) ranks.add(w);
        }
        if (ranks.isEmpty()) continue;
        List<ZmqListener> stopped = new ArrayList<>();
        m.lock.writeLock().lock();
        try {
          for (Worker w : ranks) {
            m.router.unregisterRank(w);
            Registration gone = m.unregistered(w);
            m.forgetAccuracy(w);
            if (gone != null && gone.listener() != null) stopped.add(gone.listener());
            out.add(new Removed(m.key, w));
          }
          if (m.registrations.isEmpty()) {
            m.closed = true;
            indexes.remove(m.key);
            // the replica's thread writes the index without this lock: stop it (and delete its
            // consumer) before the index closes
            if (m.nats != null) m.nats.close();
            if (m.sync != null) m.sync.close();
            m.router.close();
          }
        } finally {
          m.lock.writeLock().unlock();
        }
        // outside the write lock: the listener's thread may be waiting for the read lock, and
        // close() joins it; what it applies now is dropped (no longer the registration)
        for (ZmqListener l : stopped) {
          l.close();
          if (!m.closed) metrics.retire(m.key, l);
        }
        // the index is gone: so are its series (issue 31, #10), after its listeners stopped
        if (m.closed) metrics.forget(m.key);
      }
      if (out.isEmpty()) throw notRegistered(u);
      return out;
    } finally {
      membership.unlock();
    }
  }

  /** Stops every ZMQ listener and NATS replica, then closes every index. */
  @Override
  public void close() {
    membership.lock();
    try {
      for (ModelIndex m : indexes.values()) {
        for (Registration r : m.registrations.values()) {
          if (r.listener() != null) r.listener().close();
        }
        if (m.nats != null) m.nats.close();
        if (m.sync != null) m.sync.close();
      }
      for (ModelIndex m : indexes.values()) {
        m.lock.writeLock().lock();
        try {
          m.closed = true;
          m.router.close();
        } finally {
          m.lock.writeLock().unlock();
        }
      }
    } finally {
      membership.unlock();
    }
  }
}
