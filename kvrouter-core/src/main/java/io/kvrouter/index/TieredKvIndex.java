package io.kvrouter.index;

import io.kvrouter.event.RouterEvent;
import java.util.List;

/**
 * A {@link KvIndex} of the device tier that also takes events about the copies on slower tiers, and
 * dumps and restores them: what code that copies an index between replicas (a NATS replica's
 * snapshots, a peer's warm start) needs from a {@link TieredIndex} or a view of one (the router's
 * {@code eventFeed()}). Its {@link #apply(RouterEvent)} and {@link #dump()} are the device index's,
 * as {@link TieredIndex}'s are.
 */
public interface TieredKvIndex extends KvIndex {

  /** {@link TieredIndex#apply(Tier, RouterEvent)}: an event about the copies on {@code tier}. */
  void apply(Tier tier, RouterEvent event);

  /**
   * {@link TieredIndex#dumpTiered()}: replayed in order through {@link #apply(Tier, RouterEvent)}
   * into an empty index given {@link #addTiers} of this one's {@link #slowestTier()}, it answers
   * alike on every tier.
   */
  List<TieredIndex.Entry> dumpTiered();

  /**
   * The slowest tier the index has a cumulative index for: {@link Tier#DEVICE} until an event of
   * another tier arrived (or {@link #addTiers} made them).
   */
  Tier slowestTier();

  /**
   * Makes the cumulative indexes up to {@code upTo} now, if they do not exist yet (none for {@link
   * Tier#DEVICE}); from then on the index reports tiers, as after an event of that tier.
   */
  void addTiers(Tier upTo);
}
