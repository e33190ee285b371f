package io.kvrouter.route;

import io.kvrouter.event.RouterEvent;
import io.kvrouter.index.ForwardingKvIndex;
import io.kvrouter.index.KvIndex;

/**
 * The router's index as seen by code that applies events itself (a NATS replica, a replay): every
 * {@link #apply} is {@link KvRouter#applyEvent}, so the router's eviction-pressure counts see the
 * events too; everything else goes straight to the index. Closing it does not close the index (the
 * router owns it).
 */
final class EventFeed extends ForwardingKvIndex {
  private final KvRouter router;

  EventFeed(KvRouter router, KvIndex index) {
    super(index);
    this.router = router;
  }

  @Override
  public void apply(RouterEvent event) {
    router.applyEvent(event);
  }

  @Override
  public void close() {}

  @Override
  public String toString() {
    return "eventFeed(" + delegate() + ")";
  }
}
