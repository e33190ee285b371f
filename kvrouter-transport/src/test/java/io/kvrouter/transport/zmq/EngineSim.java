package io.kvrouter.transport.zmq;

import io.kvrouter.transport.kvevents.EngineEvent;
import io.kvrouter.transport.kvevents.FakeEngine;
import io.kvrouter.transport.kvevents.KvEventBatch;
import io.kvrouter.transport.kvevents.VllmEncoder;
import io.kvrouter.transport.kvevents.Workload;
import java.util.List;

/**
 * A simulated vLLM engine for the ZMQ tests: a {@link FakeEngine} driven by a seeded {@link
 * Workload}, whose events are encoded as one {@code KVEventBatch} per step and published through a
 * {@link FakeVllmPublisher}. Test thread only.
 */
final class EngineSim {
  final FakeVllmPublisher pub;
  final Workload workload;
  private final int blockSize;
  private final int capacity;
  private final VllmEncoder encoder;
  private final Integer dpRank;
  private FakeEngine engine;
  private double ts = 1_700_000_000.0;
  private boolean async;
  private long eventsPublished;
  private long batchesPublished;

  EngineSim(
      FakeVllmPublisher pub,
      int blockSize,
      int capacity,
      long seed,
      VllmEncoder encoder,
      Integer dpRank) {
    this.pub = pub;
    this.blockSize = blockSize;
    this.capacity = capacity;
    this.encoder = encoder;
    this.dpRank = dpRank;
    this.workload = new Workload(seed, blockSize, true);
    this.engine = new FakeEngine(blockSize, capacity);
  }

  /** From now on batches are queued for the publisher thread instead of waited for. */
  EngineSim async() {
    this.async = true;
    return this;
  }

  /** Engine events published so far (a batch holds one or more). */
  long eventsPublished() {
    return eventsPublished;
  }

  /** Batches published so far, across restarts. */
  long batchesPublished() {
    return batchesPublished;
  }

  FakeEngine engine() {
    return engine;
  }

  /** Runs {@code steps} engine steps; returns how many batches were published. */
  int run(int steps) {
    int published = 0;
    for (int i = 0; i < steps; i++) {
      workload.step(engine);
      if (publishPending() >= 0) published++;
    }
    return published;
  }

  /** Publishes what the engine did since the last batch; -1 when it did nothing. */
  long publishPending() {
    List<EngineEvent> events = engine.drain();
    if (events.isEmpty()) {
      return -1;
    }
    ts += 0.01;
    eventsPublished += events.size();
    batchesPublished++;
    byte[] payload = encoder.encode(new KvEventBatch(ts, dpRank, events, 0));
    return async ? pub.publishAsync(payload) : pub.publish(payload);
  }

  /** The engine process restarts: an empty cache, a publisher that counts from 0 again. */
  void restart() {
    engine = new FakeEngine(blockSize, capacity);
    pub.restart();
  }
}
