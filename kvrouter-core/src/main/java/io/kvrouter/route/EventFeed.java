package io.kvrouter.route;

import io.kvrouter.event.RouterEvent;
import io.kvrouter.index.ForwardingKvIndex;
import io.kvrouter.index.KvIndex;
import io.kvrouter.index.Tier;
import io.kvrouter.index.TieredIndex;
import io.kvrouter.index.TieredKvIndex;
import java.util.List;

/**
 * The router's index as seen by code that applies events itself (a NATS replica, a replay): every
 * {@link #apply} is {@link KvRouter#applyEvent}, so the router's eviction-pressure counts see the
 * events too; everything else goes straight to the index. Closing it does not close the index (the
 * router owns it). Over a {@link TieredIndex} it is a {@link TieredKvIndex} ({@link Tiered}), whose
 * tier events are {@link KvRouter#applyEvent(Tier, RouterEvent)}.
 */
sealed class EventFeed extends ForwardingKvIndex permits EventFeed.Tiered {
  final KvRouter router;

  EventFeed(KvRouter router, KvIndex index) {
    super(index);
    this.router = router;
  }

  /** The feed of {@code router} over {@code index}: {@link Tiered} over a tiered index. */
  static EventFeed of(KvRouter router, KvIndex index) {
    return index instanceof TieredIndex t ? new Tiered(router, t) : new EventFeed(router, index);
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

  /** The feed over a {@link TieredIndex}. */
  static final class Tiered extends EventFeed implements TieredKvIndex {
    private final TieredIndex tiers;

    Tiered(KvRouter router, TieredIndex tiers) {
      super(router, tiers);
      this.tiers = tiers;
    }

    @Override
    public void apply(Tier tier, RouterEvent event) {
      router.applyEvent(tier, event);
    }

    @Override
    public List<TieredIndex.Entry> dumpTiered() {
      return tiers.dumpTiered();
    }

    @Override
    public Tier slowestTier() {
      return tiers.slowestTier();
    }

    @Override
    public void addTiers(Tier upTo) {
      tiers.addTiers(upTo);
    }
  }
}
