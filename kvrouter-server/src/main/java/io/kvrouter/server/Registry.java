package io.kvrouter.server;

import io.kvrouter.event.Worker;
import io.kvrouter.route.KvRouter;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.concurrent.ConcurrentSkipListMap;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.IntFunction;

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
 * size, and dropped (closed, its counters retired into the metrics) when its last rank
 * unregisters, so a later registration may choose another block size. Removing a rank takes the
 * index's write lock (see ModelIndex) around the router's unregisterRank and the registration
 * map update.
 *
 * Lock order: membership, then a ModelIndex's lock, then the router's lock, then the index's
 * writer lock. Request paths other than register/unregister never take membership.
 * </pre>
 */
final class Registry implements AutoCloseable {
  /** A rank that an unregister removed. */
  record Removed(ModelKey key, Worker worker) {}

  private final ConcurrentSkipListMap<ModelKey, ModelIndex> indexes = new ConcurrentSkipListMap<>();
  private final ReentrantLock membership = new ReentrantLock();
  private final IntFunction<KvRouter> routers;
  private ServerMetrics metrics;

  /** {@code routers} builds the router of a new index from its block size. */
  Registry(IntFunction<KvRouter> routers) {
    this.routers = routers;
  }

  /** Connects the metrics (they read this registry, so they are made after it). */
  void metrics(ServerMetrics metrics) {
    this.metrics = metrics;
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

  /**
   * Registers one rank; creates the index on the first registration of its key.
   *
   * @throws ApiException 409 when the index uses another block size or the rank is registered
   */
  ModelIndex register(ModelKey key, int blockSize, Registration r) {
    membership.lock();
    try {
      ModelIndex m = indexes.get(key);
      if (m != null && m.blockSize != blockSize) {
        throw ApiException.conflict(
            key.describe()
                + " uses block_size "
                + m.blockSize
                + " (fixed by its first registration); this registration asks for "
                + blockSize
                + ": blocks of another size never match");
      }
      if (m != null && m.registrations.containsKey(r.worker())) {
        throw ApiException.conflict(
            "instance "
                + Long.toUnsignedString(r.worker().workerId())
                + " dp_rank "
                + r.worker().dpRank()
                + " is already registered for "
                + key.describe()
                + "; unregister it first");
      }
      if (m == null) {
        m = new ModelIndex(key, blockSize, routers.apply(blockSize), metrics.findMatches(key));
        indexes.put(key, m);
      }
      m.router.registerRank(r.worker(), blockSize, r.kvBlocks());
      m.registrations.put(r.worker(), r);
      return m;
    } finally {
      membership.unlock();
    }
  }

  /**
   * Removes the ranks of {@code instanceId} matching the optional group and rank.
   *
   * @param routingGroup null: every routing group of the model
   * @param dpRank negative: every rank
   * @throws ApiException 404 when nothing matched
   */
  List<Removed> unregister(String modelName, String routingGroup, long instanceId, int dpRank) {
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
        m.lock.writeLock().lock();
        try {
          for (Worker w : ranks) {
            m.router.unregisterRank(w);
            m.registrations.remove(w);
            out.add(new Removed(m.key, w));
          }
          if (m.registrations.isEmpty()) {
            m.closed = true;
            indexes.remove(m.key);
            metrics.retire(m);
            m.router.close();
          }
        } finally {
          m.lock.writeLock().unlock();
        }
      }
      if (out.isEmpty()) {
        throw ApiException.notFound(
            "instance "
                + Long.toUnsignedString(instanceId)
                + (dpRank < 0 ? "" : " dp_rank " + dpRank)
                + " is not registered for model '"
                + modelName
                + "'"
                + (routingGroup == null ? "" : " (routing group '" + routingGroup + "')"));
      }
      return out;
    } finally {
      membership.unlock();
    }
  }

  /** Closes every index. */
  @Override
  public void close() {
    membership.lock();
    try {
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
