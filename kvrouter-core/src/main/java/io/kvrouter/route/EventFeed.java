package io.kvrouter.route;

import io.kvrouter.event.RouterEvent;
import io.kvrouter.index.IndexStats;
import io.kvrouter.index.KvIndex;
import io.kvrouter.index.OverlapScores;
import java.util.List;

/**
 * The router's index as seen by code that applies events itself (a NATS replica, a replay): every
 * {@link #apply} is {@link KvRouter#applyEvent}, so the router's eviction-pressure counts see the
 * events too; everything else goes straight to the index. Closing it does not close the index (the
 * router owns it).
 */
final class EventFeed implements KvIndex {
  private final KvRouter router;
  private final KvIndex index;

  EventFeed(KvRouter router, KvIndex index) {
    this.router = router;
    this.index = index;
  }

  @Override
  public void apply(RouterEvent event) {
    router.applyEvent(event);
  }

  @Override
  public OverlapScores findMatches(long[] localHashes, boolean earlyExit) {
    return index.findMatches(localHashes, earlyExit);
  }

  @Override
  public void clearWorker(long workerId) {
    index.clearWorker(workerId);
  }

  @Override
  public void removeWorker(long workerId) {
    index.removeWorker(workerId);
  }

  @Override
  public long[] workerIds() {
    return index.workerIds();
  }

  @Override
  public List<RouterEvent> dump() {
    return index.dump();
  }

  @Override
  public void flush() {
    index.flush();
  }

  @Override
  public IndexStats stats() {
    return index.stats();
  }

  @Override
  public void close() {}

  @Override
  public String toString() {
    return "eventFeed(" + index + ")";
  }
}
