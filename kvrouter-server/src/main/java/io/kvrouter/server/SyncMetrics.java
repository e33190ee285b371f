package io.kvrouter.server;

import io.kvrouter.transport.nats.NatsSequenceSync;
import io.prometheus.metrics.core.metrics.CounterWithCallback;
import io.prometheus.metrics.core.metrics.GaugeWithCallback;
import io.prometheus.metrics.core.metrics.SummaryWithCallback;
import io.prometheus.metrics.model.registry.PrometheusRegistry;
import io.prometheus.metrics.model.snapshots.Quantiles;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.function.Supplier;
import java.util.function.ToLongFunction;

/**
 * The metrics of the indexes' sequence sync ({@code kvrouter_sync_*} per index, with {@code
 * --sync}); part of {@link ServerMetrics}.
 *
 * <pre>
 * Implementation notes
 *
 * Data layout: SYNC_FIELDS lists every exported counter (family, help, how to read it from a
 * NatsSequenceSync.Stats); readSync() reads them in that order followed by the lag count and lag
 * sum (milliseconds), which the kvrouter_sync_lag_seconds summary exports. Callbacks read the
 * live indexes' syncs at scrape time only: a dropped index's series leave /metrics with it (issue
 * 31, #10) and a model registered again starts from 0. Stateless past its constructor, so
 * thread-safe.
 * </pre>
 */
final class SyncMetrics {
  /** One exported counter of an index's sequence sync. */
  private record SyncField(
      String family, String help, ToLongFunction<NatsSequenceSync.Stats> value) {}

  private static final List<SyncField> SYNC_FIELDS =
      List.of(
          new SyncField(
              "kvrouter_sync_messages_published_total",
              "Sequence sync messages (batches and heartbeats) this replica published",
              NatsSequenceSync.Stats::batchesPublished),
          new SyncField(
              "kvrouter_sync_changes_published_total",
              "Changes of this replica's bookkeeping published (routed, prefill done, freed,"
                  + " expired; in approximate mode also predicted, corrected)",
              NatsSequenceSync.Stats::changesPublished),
          new SyncField(
              "kvrouter_sync_bytes_published_total",
              "Bytes of the sequence sync messages this replica published",
              NatsSequenceSync.Stats::bytesPublished),
          new SyncField(
              "kvrouter_sync_publish_errors_total",
              "Sequence sync messages the NATS client refused (disconnected past its buffer)",
              NatsSequenceSync.Stats::publishErrors),
          new SyncField(
              "kvrouter_sync_messages_received_total",
              "Peer replicas' sequence sync messages received",
              NatsSequenceSync.Stats::batchesReceived),
          new SyncField(
              "kvrouter_sync_own_messages_skipped_total",
              "This replica's own messages, skipped by replica id",
              NatsSequenceSync.Stats::ownSkipped),
          new SyncField(
              "kvrouter_sync_changes_applied_total",
              "Peer changes applied to this replica's loads",
              st -> st.sync().peerChangesApplied()),
          new SyncField(
              "kvrouter_sync_predictions_published_total",
              "Approximate-mode predictions and corrections this replica shared",
              st -> st.sync().localPredictions()),
          new SyncField(
              "kvrouter_sync_predictions_applied_total",
              "Peer predictions and corrections applied to this replica's cache model",
              st -> st.sync().peerPredictionsApplied()),
          new SyncField(
              "kvrouter_sync_prediction_gaps_total",
              "Peer predictions never received (numbers skipped; the next ones apply anyway)",
              st -> st.sync().predictionGaps()),
          new SyncField(
              "kvrouter_sync_duplicates_total",
              "Peer changes skipped as already applied",
              st -> st.sync().duplicates()),
          new SyncField(
              "kvrouter_sync_gaps_total",
              "Peer messages that showed lost changes (the peer's snapshot is then loaded)",
              st -> st.sync().gaps()),
          new SyncField(
              "kvrouter_sync_unknown_rank_total",
              "Peer requests and predictions skipped because their worker rank is not registered"
                  + " here",
              st -> st.sync().unknownRank()),
          new SyncField(
              "kvrouter_sync_snapshots_fetched_total",
              "Peer snapshots fetched and loaded",
              NatsSequenceSync.Stats::snapshotsFetched),
          new SyncField(
              "kvrouter_sync_snapshots_served_total",
              "Snapshot requests of peers answered",
              NatsSequenceSync.Stats::snapshotsServed),
          new SyncField(
              "kvrouter_sync_snapshot_failures_total",
              "Peer snapshot fetches that failed",
              NatsSequenceSync.Stats::snapshotFailures),
          new SyncField(
              "kvrouter_sync_decode_errors_total",
              "Messages on a sequence sync subject that are not sequence sync messages",
              NatsSequenceSync.Stats::decodeErrors),
          new SyncField(
              "kvrouter_sync_peers_dropped_total",
              "Peers dropped with their requests (silent, said goodbye, restarted)",
              st -> st.sync().peersDropped()),
          new SyncField(
              "kvrouter_sync_outbox_dropped_total",
              "Changes dropped from a full outbox, never published (peers reload a snapshot)",
              st -> st.sync().outboxDropped()));

  /** Counters of the sequence syncs of dropped indexes, in SYNC_FIELDS order, then the lag. */
  private final PrometheusRegistry registry;

  private final Supplier<Collection<ModelIndex>> indexes;

  /** Registers the sync families in {@code registry}, reading the syncs of {@code indexes}. */
  SyncMetrics(PrometheusRegistry registry, Supplier<Collection<ModelIndex>> indexes) {
    this.registry = registry;
    this.indexes = indexes;
    registerFamilies();
  }

  private static long[] readSync(NatsSequenceSync.Stats st) {
    long[] v = new long[SYNC_FIELDS.size() + 2];
    for (int i = 0; i < SYNC_FIELDS.size(); i++) v[i] = SYNC_FIELDS.get(i).value().applyAsLong(st);
    v[SYNC_FIELDS.size()] = st.lagCount();
    v[SYNC_FIELDS.size() + 1] = st.lagSumMillis();
    return v;
  }

  private Map<ModelKey, long[]> syncByKey() {
    Map<ModelKey, long[]> all = new TreeMap<>();
    for (ModelIndex m : indexes.get()) {
      if (m.sync != null) all.merge(m.key, readSync(m.sync.stats()), ServerMetrics::sum);
    }
    return all;
  }

  private void registerFamilies() {
    for (int i = 0; i < SYNC_FIELDS.size(); i++) {
      int field = i;
      SyncField f = SYNC_FIELDS.get(i);
      CounterWithCallback.builder()
          .name(f.family())
          .help(f.help() + ", per index (sequence sync, --sync)")
          .labelNames("model_name", "routing_group")
          .callback(
              cb -> {
                for (Map.Entry<ModelKey, long[]> e : syncByKey().entrySet()) {
                  cb.call(e.getValue()[field], e.getKey().modelName(), e.getKey().routingGroup());
                }
              })
          .register(registry);
    }
    SummaryWithCallback.builder()
        .name("kvrouter_sync_lag_seconds")
        .help(
            "Lag of each peer message, from its publication (the peer's wall clock) to its"
                + " application here, per index (sequence sync)")
        .labelNames("model_name", "routing_group")
        .callback(
            cb -> {
              int n = SYNC_FIELDS.size();
              for (Map.Entry<ModelKey, long[]> e : syncByKey().entrySet()) {
                cb.call(
                    e.getValue()[n],
                    e.getValue()[n + 1] / 1000.0,
                    Quantiles.EMPTY,
                    e.getKey().modelName(),
                    e.getKey().routingGroup());
              }
            })
        .register(registry);
    GaugeWithCallback.builder()
        .name("kvrouter_sync_lag_max_seconds")
        .help("Largest sequence sync lag seen since the index was made, per index")
        .labelNames("model_name", "routing_group")
        .callback(
            cb -> {
              for (ModelIndex m : indexes.get()) {
                if (m.sync == null) continue;
                cb.call(
                    m.sync.stats().lagMaxMillis() / 1000.0,
                    m.key.modelName(),
                    m.key.routingGroup());
              }
            })
        .register(registry);
    GaugeWithCallback.builder()
        .name("kvrouter_sync_peers")
        .help("Peer replicas this replica hears from now, per index (sequence sync)")
        .labelNames("model_name", "routing_group")
        .callback(
            cb -> {
              for (ModelIndex m : indexes.get()) {
                if (m.sync == null) continue;
                cb.call(m.sync.stats().peers(), m.key.modelName(), m.key.routingGroup());
              }
            })
        .register(registry);
    GaugeWithCallback.builder()
        .name("kvrouter_sync_peer_requests")
        .help("Peer replicas' requests in flight counted in this replica's loads, per index")
        .labelNames("model_name", "routing_group")
        .callback(
            cb -> {
              for (ModelIndex m : indexes.get()) {
                if (m.sync == null) continue;
                cb.call(m.sync.stats().peerRequests(), m.key.modelName(), m.key.routingGroup());
              }
            })
        .register(registry);
  }
}
