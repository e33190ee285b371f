package io.kvrouter.transport.nats;

import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.index.KvIndex;
import io.kvrouter.index.Tier;
import io.kvrouter.index.TieredIndex;
import io.kvrouter.index.TieredKvIndex;
import io.kvrouter.transport.kvevents.StorageTier;
import io.kvrouter.transport.kvevents.TieredEvent;
import java.util.ArrayList;
import java.util.List;

/**
 * How a replica applies, dumps and restores events with their tier (docs/ingestion.md, "Tiers on
 * the stream"), for any index: a {@link TieredKvIndex} gets every tier, another index the device
 * events only.
 *
 * <pre>
 * Implementation notes
 *
 * Stateless. StorageTier (transport) and Tier (core) mirror each other constant for constant;
 * the conversions go by name. The meaning of an event on the stream is that of Dynamo's JSON
 * event, as POST /events gives it: a device event is apply(RouterEvent) (a device Cleared clears
 * the rank on every tier, as before tiers existed); a Cleared of any other tier too (Dynamo's
 * indexer clears every tier whatever the event names); a Stored or Removed of another tier is
 * apply(tier, event), or dropped by an index without tiers (as over ZMQ: offloaded copies are
 * not scored there).
 * </pre>
 */
final class TierEvents {
  private TierEvents() {}

  /** The core tier of a transport tier. */
  static Tier tier(StorageTier t) {
    return Tier.valueOf(t.name());
  }

  /** The transport tier of a core tier. */
  static StorageTier storageTier(Tier t) {
    return StorageTier.valueOf(t.name());
  }

  /** Applies one event of the stream or of a snapshot to {@code index}. */
  static void apply(KvIndex index, TieredEvent te) {
    RouterEvent e = te.event();
    if (te.tier() == StorageTier.DEVICE || e.data() instanceof CacheEvent.Cleared) {
      index.apply(e);
    } else if (index instanceof TieredKvIndex t) {
      t.apply(tier(te.tier()), e);
    }
  }

  /** A dump with the slowest tier the index had (DEVICE: no tiers). */
  record Dump(List<TieredEvent> events, StorageTier slowest) {}

  /** The index's dump on every tier (a device dump for an index without tiers). */
  static Dump dump(KvIndex index) {
    if (index instanceof TieredKvIndex t) {
      Tier slowest = t.slowestTier(); // before the dump: levels only ever get added
      List<TieredIndex.Entry> entries = t.dumpTiered();
      List<TieredEvent> out = new ArrayList<>(entries.size());
      for (TieredIndex.Entry x : entries)
        out.add(new TieredEvent(storageTier(x.tier()), x.event()));
      return new Dump(out, storageTier(slowest));
    }
    List<RouterEvent> events = index.dump();
    List<TieredEvent> out = new ArrayList<>(events.size());
    for (RouterEvent e : events) out.add(new TieredEvent(StorageTier.DEVICE, e));
    return new Dump(out, StorageTier.DEVICE);
  }

  /**
   * Restores a dump into the empty or cleared {@code index}: its tiers first (so that it has the
   * dumped index's tiers even with no block left off the device), then its events in order.
   */
  static void restore(KvIndex index, List<TieredEvent> events, StorageTier slowest) {
    if (slowest != StorageTier.DEVICE && index instanceof TieredKvIndex t) {
      t.addTiers(tier(slowest));
    }
    for (TieredEvent te : events) {
      RouterEvent e = te.event();
      if (te.tier() == StorageTier.DEVICE) {
        index.apply(e);
      } else if (index instanceof TieredKvIndex t) {
        t.apply(tier(te.tier()), e); // a dump holds stores only: no Cleared to widen
      }
    }
  }
}
