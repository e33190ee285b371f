package io.kvrouter.server;

import io.kvrouter.transport.nats.NatsReplicaStats;
import io.prometheus.metrics.core.metrics.CounterWithCallback;
import io.prometheus.metrics.model.registry.PrometheusRegistry;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.function.Supplier;
import java.util.function.ToLongFunction;

/**
 * The metrics of the indexes' NATS replicas ({@code kvrouter_nats_*} per index, with {@code serve
 * --events nats://...}); part of {@link ServerMetrics}.
 *
 * <pre>
 * Implementation notes
 *
 * Data layout: NATS_FIELDS lists every exported counter (family, help, how to read it from a
 * replica's NatsReplicaStats). Callbacks read the live indexes' replicas at scrape time only: a
 * dropped index's series leave /metrics with it (issue 31, #10) and a model registered again
 * starts from 0. Stateless past its constructor, so thread-safe.
 * </pre>
 */
final class NatsMetrics {
  /** One exported counter of an index's NATS replica. */
  private record NatsField(String family, String help, ToLongFunction<NatsReplicaStats> value) {}

  private static final List<NatsField> NATS_FIELDS =
      List.of(
          new NatsField(
              "kvrouter_nats_messages_total",
              "Messages delivered by the index's NATS consumer",
              NatsReplicaStats::messages),
          new NatsField(
              "kvrouter_nats_events_applied_total",
              "Events from the NATS stream applied to the index",
              NatsReplicaStats::applied),
          new NatsField(
              "kvrouter_nats_duplicates_total",
              "Redeliveries skipped by stream sequence",
              NatsReplicaStats::duplicates),
          new NatsField(
              "kvrouter_nats_decode_errors_total",
              "Messages that are not one router event (terminated, skipped)",
              NatsReplicaStats::malformed),
          new NatsField(
              "kvrouter_nats_gaps_total",
              "Lost deliveries detected (the consumer was recreated at the last applied + 1)",
              NatsReplicaStats::gaps),
          new NatsField(
              "kvrouter_nats_resyncs_total",
              "Rebuilds of the index from the newest snapshot (the stream was purged past it)",
              NatsReplicaStats::resyncs),
          new NatsField(
              "kvrouter_nats_consumer_errors_total",
              "Failed consumer operations (retried with backoff)",
              NatsReplicaStats::consumerErrors),
          new NatsField(
              "kvrouter_nats_snapshots_restored_total",
              "Snapshots loaded (at start and in resyncs)",
              NatsReplicaStats::snapshotsRestored),
          new NatsField(
              "kvrouter_nats_snapshots_written_total",
              "Snapshots this server wrote",
              NatsReplicaStats::snapshotsWritten),
          new NatsField(
              "kvrouter_nats_snapshot_failures_total",
              "Snapshots that could not be written",
              NatsReplicaStats::snapshotFailures),
          new NatsField(
              "kvrouter_nats_purged_messages_total",
              "Stream messages purged after this server's snapshots",
              NatsReplicaStats::purgedMessages));

  /** Counters of NATS replicas of dropped indexes, in NATS_FIELDS order. */
  private final PrometheusRegistry registry;

  private final Supplier<Collection<ModelIndex>> indexes;

  /** Registers the NATS families in {@code registry}, reading the replicas of {@code indexes}. */
  NatsMetrics(PrometheusRegistry registry, Supplier<Collection<ModelIndex>> indexes) {
    this.registry = registry;
    this.indexes = indexes;
    registerFamilies();
  }

  private static long[] readNats(NatsEvents.Feed f) {
    NatsReplicaStats st = f.replica().stats();
    long[] v = new long[NATS_FIELDS.size()];
    for (int i = 0; i < v.length; i++) v[i] = NATS_FIELDS.get(i).value().applyAsLong(st);
    return v;
  }

  private void registerFamilies() {
    for (int i = 0; i < NATS_FIELDS.size(); i++) {
      int field = i;
      NatsField f = NATS_FIELDS.get(i);
      CounterWithCallback.builder()
          .name(f.family())
          .help(f.help() + ", per index (serve --events nats://...)")
          .labelNames("model_name", "routing_group")
          .callback(
              cb -> {
                Map<ModelKey, long[]> all = new TreeMap<>();
                for (ModelIndex m : indexes.get()) {
                  if (m.nats != null) all.merge(m.key, readNats(m.nats), ServerMetrics::sum);
                }
                for (Map.Entry<ModelKey, long[]> e : all.entrySet()) {
                  cb.call(e.getValue()[field], e.getKey().modelName(), e.getKey().routingGroup());
                }
              })
          .register(registry);
    }
  }
}
