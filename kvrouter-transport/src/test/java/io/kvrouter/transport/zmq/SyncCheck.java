package io.kvrouter.transport.zmq;

import io.kvrouter.event.Worker;
import io.kvrouter.hash.BlockHasher;
import io.kvrouter.index.KvIndex;
import io.kvrouter.transport.TestWaits;
import java.time.Duration;
import java.util.List;

/**
 * Waits until a subscriber has dealt with everything a simulated engine published and the router's
 * index answers like the engine: for every probe prompt the worker's score, in engine blocks,
 * equals the engine's lookup; with equal block sizes the index also holds exactly as many blocks as
 * the engine caches.
 */
final class SyncCheck {
  private SyncCheck() {}

  static final Duration TIMEOUT = TestWaits.WAIT;

  record Engine(EngineSim sim, Worker worker, List<int[]> probes) {}

  static Engine of(EngineSim sim, long workerId) {
    return new Engine(sim, Worker.of(workerId), sim.workload.probes());
  }

  static void awaitInSync(
      ZmqEventSubscriber sub, KvIndex index, BlockHasher router, Engine... engines) {
    long deadline = System.nanoTime() + TIMEOUT.toNanos();
    String why;
    while (true) {
      why = mismatch(sub, index, router, engines);
      if (why == null) {
        return;
      }
      if (System.nanoTime() > deadline) {
        throw new AssertionError(
            "index not in sync with the engine after " + TIMEOUT + ": " + why + "; " + sub.stats());
      }
      FakeVllmPublisher.sleep(20);
    }
  }

  private static String mismatch(
      ZmqEventSubscriber sub, KvIndex index, BlockHasher router, Engine... engines) {
    long expectedBlocks = 0;
    boolean equalSizes = true;
    for (Engine e : engines) {
      long applied = sub.lastSequence(e.sim().pub.topic());
      long published = e.sim().pub.lastSeq();
      if (applied < published) {
        return e.worker() + ": applied through " + applied + " of " + published;
      }
      int k = e.sim().engine().blockSize() / router.blockSize();
      equalSizes &= k == 1;
      expectedBlocks += e.sim().engine().cachedBlocks();
      for (int[] p : e.probes()) {
        int score = index.findMatches(router.localHashes(p), false).score(e.worker());
        int lookup = e.sim().engine().lookup(p);
        if (score / k != lookup) {
          return e.worker()
              + ": a probe scores "
              + score
              + " router blocks, the engine holds "
              + lookup
              + " engine blocks of it";
        }
      }
    }
    long indexed = index.stats().blocksIndexed();
    if (equalSizes && indexed != expectedBlocks) {
      return "the index holds " + indexed + " blocks, the engines " + expectedBlocks;
    }
    return null;
  }
}
