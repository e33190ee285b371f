package io.kvrouter.server;

import io.kvrouter.index.IndexStats;
import io.kvrouter.index.Tier;
import io.kvrouter.index.TieredIndex;
import io.prometheus.metrics.core.metrics.CounterWithCallback;
import io.prometheus.metrics.core.metrics.GaugeWithCallback;
import io.prometheus.metrics.model.registry.PrometheusRegistry;
import java.util.Collection;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import java.util.function.Supplier;

/**
 * The metrics of the indexes themselves, per model and routing group: events applied, blocks held
 * and evicted, blocks per tier, registered ranks, requests in flight; part of {@link
 * ServerMetrics}.
 *
 * <pre>
 * Implementation notes
 *
 * Everything is read by callbacks at scrape time from the live indexes (what IndexStats already
 * counts, the registrations, the router's in-flight count, the tiered index's blocks), so the
 * event path pays nothing for them. An index that the Registry dropped leaves every family with
 * it (issue 31, #10: /metrics stays bounded by what is registered now); a model registered again
 * starts its counters from 0. Stateless past its constructor, so thread-safe.
 * </pre>
 */
final class IndexMetrics {
  private final PrometheusRegistry registry;
  private final Supplier<Collection<ModelIndex>> indexes;

  /** Registers the index families in {@code registry}, reading {@code indexes}. */
  IndexMetrics(PrometheusRegistry registry, Supplier<Collection<ModelIndex>> indexes) {
    this.registry = registry;
    this.indexes = indexes;
    registerEventCounters();
    registerGauges();
    registerTiers();
    registerInFlight();
  }

  /** Events applied, Removed events' missing blocks, blocks a bounded index evicted. */
  private void registerEventCounters() {
    CounterWithCallback.builder()
        .name("kvrouter_events_applied_total")
        .help(
            "KV events the indexes applied, by type and outcome (applied, or rejected because"
                + " the worker did not hold the parent block)")
        .labelNames("model_name", "routing_group", "type", "outcome")
        .callback(
            cb -> {
              for (Map.Entry<ModelKey, IndexStats> e : statsByKey(indexes.get()).entrySet()) {
                ModelKey k = e.getKey();
                IndexStats s = e.getValue();
                String m = k.modelName();
                String g = k.routingGroup();
                cb.call(s.storedEvents(), m, g, "stored", "applied");
                cb.call(s.parentMissing(), m, g, "stored", "parent_missing");
                cb.call(s.removedEvents(), m, g, "removed", "applied");
                cb.call(s.clearedEvents(), m, g, "cleared", "applied");
              }
            })
        .register(registry);
    CounterWithCallback.builder()
        .name("kvrouter_removed_blocks_missing_total")
        .help("Blocks named by Removed events that the worker did not hold (skipped)")
        .labelNames("model_name", "routing_group")
        .callback(
            cb -> {
              for (Map.Entry<ModelKey, IndexStats> e : statsByKey(indexes.get()).entrySet()) {
                cb.call(
                    e.getValue().blocksMissing(),
                    e.getKey().modelName(),
                    e.getKey().routingGroup());
              }
            })
        .register(registry);
    CounterWithCallback.builder()
        .name("kvrouter_index_evicted_blocks_total")
        .help("(worker rank, block) pairs a bounded index dropped to stay within --max-blocks")
        .labelNames("model_name", "routing_group")
        .callback(
            cb ->
                statsByKey(indexes.get())
                    .forEach((k, s) -> cb.call(s.evictedBlocks(), k.modelName(), k.routingGroup())))
        .register(registry);
  }

  /** Registered ranks and blocks held. */
  private void registerGauges() {
    GaugeWithCallback.builder()
        .name("kvrouter_workers")
        .help("Registered worker ranks per model and routing group")
        .labelNames("model_name", "routing_group")
        .callback(
            cb -> {
              for (ModelIndex m : indexes.get()) {
                cb.call(m.registrations.size(), m.key.modelName(), m.key.routingGroup());
              }
            })
        .register(registry);
    GaugeWithCallback.builder()
        .name("kvrouter_blocks_indexed")
        .help("(worker rank, block) pairs held in the index per model and routing group")
        .labelNames("model_name", "routing_group")
        .callback(
            cb -> {
              for (ModelIndex m : indexes.get()) {
                cb.call(
                    m.router.index().stats().blocksIndexed(),
                    m.key.modelName(),
                    m.key.routingGroup());
              }
            })
        .register(registry);
  }

  /** Blocks per tier, and blocks dropped from a tier past --max-tier-blocks. */
  private void registerTiers() {
    GaugeWithCallback.builder()
        .name("kvrouter_tier_blocks")
        .help(
            "Blocks per storage tier (device, host, disk, external) per model and routing group,"
                + " for indexes whose engines published offloaded copies: device counts the"
                + " (rank, block) pairs that can score, the others the distinct blocks the ranks'"
                + " events left on that tier")
        .labelNames("model_name", "routing_group", "tier")
        .callback(
            cb -> {
              for (ModelIndex m : indexes.get()) {
                TieredIndex t = m.tiers();
                if (t == null) continue;
                for (Tier tier : Tier.values()) {
                  long n = tier == Tier.DEVICE ? t.stats().blocksIndexed() : t.blockCount(tier);
                  cb.call(
                      n,
                      m.key.modelName(),
                      m.key.routingGroup(),
                      tier.name().toLowerCase(Locale.ROOT));
                }
              }
            })
        .register(registry);
    CounterWithCallback.builder()
        .name("kvrouter_tier_evicted_blocks_total")
        .help(
            "Blocks dropped from a tier beyond the device (host, disk, external) to keep each"
                + " worker rank within --max-tier-blocks, per model and routing group")
        .labelNames("model_name", "routing_group", "tier")
        .callback(
            cb ->
                tierEvictionsByKey(indexes.get())
                    .forEach(
                        (k, v) -> {
                          for (int t = 1; t < v.length; t++) {
                            cb.call(
                                v[t],
                                k.modelName(),
                                k.routingGroup(),
                                Tier.of(t).name().toLowerCase(Locale.ROOT));
                          }
                        }))
        .register(registry);
  }

  /** Routed requests not yet freed. */
  private void registerInFlight() {
    GaugeWithCallback.builder()
        .name("kvrouter_requests_in_flight")
        .help("Routed requests not yet freed (nor expired) per model and routing group")
        .labelNames("model_name", "routing_group")
        .callback(
            cb -> {
              for (ModelIndex m : indexes.get()) {
                cb.call(m.router.inFlight(), m.key.modelName(), m.key.routingGroup());
              }
            })
        .register(registry);
  }

  private Map<ModelKey, IndexStats> statsByKey(Collection<ModelIndex> live) {
    Map<ModelKey, IndexStats> out = new TreeMap<>();
    for (ModelIndex m : live) out.merge(m.key, m.router.index().stats(), IndexStats::plus);
    return out;
  }

  /** Blocks each tier dropped past --max-tier-blocks, live indexes, by index. */
  private Map<ModelKey, long[]> tierEvictionsByKey(Collection<ModelIndex> live) {
    Map<ModelKey, long[]> out = new TreeMap<>();
    for (ModelIndex m : live) {
      long[] v = m.tierEvictions();
      if (v != null) out.merge(m.key, v, ServerMetrics::sum);
    }
    return out;
  }
}
