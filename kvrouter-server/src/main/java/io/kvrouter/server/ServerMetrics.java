package io.kvrouter.server;

import io.kvrouter.index.IndexStats;
import io.kvrouter.transport.nats.NatsReplicaStats;
import io.kvrouter.transport.nats.NatsSequenceSync;
import io.prometheus.metrics.core.datapoints.CounterDataPoint;
import io.prometheus.metrics.core.datapoints.DistributionDataPoint;
import io.prometheus.metrics.core.metrics.Counter;
import io.prometheus.metrics.core.metrics.CounterWithCallback;
import io.prometheus.metrics.core.metrics.GaugeWithCallback;
import io.prometheus.metrics.core.metrics.Histogram;
import io.prometheus.metrics.core.metrics.SummaryWithCallback;
import io.prometheus.metrics.expositionformats.PrometheusTextFormatWriter;
import io.prometheus.metrics.instrumentation.jvm.JvmMetrics;
import io.prometheus.metrics.model.registry.PrometheusRegistry;
import java.io.IOException;
import java.io.OutputStream;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Supplier;
import java.util.function.ToDoubleFunction;
import java.util.function.ToLongFunction;

/**
 * The service's Prometheus metrics ({@code kvrouter_*}, base units, counters ending in {@code
 * _total}) and the JVM's, in one registry per server, written in the text exposition format.
 *
 * <pre>
 * Implementation notes
 *
 * Counters and histograms the request path updates are stateful Prometheus metrics; the data
 * point of each label combination is looked up once and cached (httpPoints per endpoint and
 * status class, one findMatches point per index), so a request pays an atomic add, not a label
 * lookup. What the indexes already count (IndexStats: events by type and outcome, blocks held)
 * and the registrations are read by callbacks at scrape time from the live indexes; when the
 * Registry drops an index it adds its last IndexStats to retired, so those counters stay
 * monotonic when a model is registered again. Everything here is thread-safe.
 * </pre>
 */
final class ServerMetrics {
  private static final String[] STATUS_CLASSES = {"1xx", "2xx", "3xx", "4xx", "5xx"};

  private final PrometheusRegistry registry = new PrometheusRegistry();

  /** The registry /metrics writes (a ServerExtension registers its own metrics in it). */
  PrometheusRegistry registry() {
    return registry;
  }

  private final PrometheusTextFormatWriter writer = PrometheusTextFormatWriter.create();

  private final Counter httpRequests =
      Counter.builder()
          .name("kvrouter_http_requests_total")
          .help("HTTP requests answered, by endpoint and status class")
          .labelNames("endpoint", "status_class")
          .register(registry);
  private final Histogram httpSeconds =
      Histogram.builder()
          .name("kvrouter_http_request_duration_seconds")
          .help("Time from routing a request to its handler until its answer was written")
          .labelNames("endpoint", "status_class")
          .classicOnly()
          .classicUpperBounds(
              0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,
              2.5, 5, 10)
          .register(registry);
  private final Histogram findMatchesSeconds =
      Histogram.builder()
          .name("kvrouter_find_matches_duration_seconds")
          .help("Time of one index findMatches call for /query and /query_by_hash")
          .labelNames("model_name", "routing_group")
          .classicOnly()
          .classicUpperBounds(
              0.000001, 0.0000025, 0.000005, 0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005,
              0.001, 0.0025, 0.005, 0.01)
          .register(registry);
  private final Counter routeDecisions =
      Counter.builder()
          .name("kvrouter_route_decisions_total")
          .help("Requests routed, by chosen worker rank")
          .labelNames("model_name", "routing_group", "instance_id", "dp_rank")
          .register(registry);
  private final Counter routeRejections =
      Counter.builder()
          .name("kvrouter_route_rejections_total")
          .help("Requests not routed: every allowed worker busy, or no worker to consider")
          .labelNames("model_name", "routing_group", "reason")
          .register(registry);
  private final Counter eventsReceived =
      Counter.builder()
          .name("kvrouter_events_received_total")
          .help("KV events accepted for application, by source")
          .labelNames("source")
          .register(registry);
  private final Counter eventBatchesRejected =
      Counter.builder()
          .name("kvrouter_event_batches_rejected_total")
          .help("Event batches refused whole (nothing applied), by reason")
          .labelNames("source", "reason")
          .register(registry);
  private final Counter decodeErrors =
      Counter.builder()
          .name("kvrouter_event_decode_errors_total")
          .help("Event payloads that could not be decoded, by source")
          .labelNames("source")
          .register(registry);

  private final Counter natsPublishDuplicates =
      Counter.builder()
          .name("kvrouter_nats_publish_duplicates_total")
          .help(
              "Events of POST /events batches that the NATS stream already held (a retry with"
                  + " the same Idempotency-Key): acknowledged, not stored again")
          .register(registry);

  private final Counter registrationLog =
      Counter.builder()
          .name("kvrouter_nats_registration_ops_total")
          .help(
              "Operations of the NATS registration log applied by this server (every replica's,"
                  + " its own included), by op (register, unregister, unknown, none) and outcome"
                  + " (applied; refused: a 409 or 404 every replica meets; malformed; skipped; failed)")
          .labelNames("op", "outcome")
          .register(registry);

  private final Map<String, CounterDataPoint[]> httpCounts = new ConcurrentHashMap<>();
  private final Map<String, DistributionDataPoint[]> httpTimes = new ConcurrentHashMap<>();
  private final Map<ModelKey, IndexStats> retired = new ConcurrentHashMap<>();
  private final CounterDataPoint httpEventsReceived;
  private final CounterDataPoint zmqEventsReceived;

  /** One exported counter of a ZMQ listener: its family, an extra label value or null, a reader. */
  private record ZmqField(String family, String extra, ToLongFunction<ZmqListener> value) {}

  private static final String[] ZMQ_LABELS = {
    "model_name", "routing_group", "instance_id", "dp_rank"
  };

  private static final List<ZmqField> ZMQ_FIELDS =
      List.of(
          new ZmqField("kvrouter_zmq_messages_total", null, l -> l.stats().messages()),
          new ZmqField("kvrouter_zmq_batches_total", null, l -> l.stats().batches()),
          new ZmqField("kvrouter_zmq_decode_errors_total", null, l -> l.stats().decodeErrors()),
          new ZmqField("kvrouter_zmq_bad_frames_total", null, l -> l.stats().badFrames()),
          new ZmqField("kvrouter_zmq_duplicates_total", null, l -> l.stats().duplicates()),
          new ZmqField("kvrouter_zmq_gaps_total", null, l -> l.stats().gaps()),
          new ZmqField("kvrouter_zmq_lost_messages_total", null, l -> l.stats().lostMessages()),
          new ZmqField("kvrouter_zmq_replays_total", null, l -> l.stats().replays()),
          new ZmqField(
              "kvrouter_zmq_replayed_messages_total", null, l -> l.stats().replayedMessages()),
          new ZmqField("kvrouter_zmq_replay_failures_total", null, l -> l.stats().replayFailures()),
          new ZmqField("kvrouter_zmq_restarts_total", null, l -> l.stats().restarts()),
          new ZmqField("kvrouter_zmq_tail_probes_total", null, l -> l.stats().tailProbes()),
          new ZmqField(
              "kvrouter_zmq_tail_recovered_messages_total", null, l -> l.stats().tailRecovered()),
          new ZmqField(
              "kvrouter_zmq_event_lag_microseconds_total", null, l -> l.stats().lagMicros()),
          new ZmqField("kvrouter_zmq_event_lag_batches_total", null, l -> l.stats().lagBatches()),
          new ZmqField(
              "kvrouter_zmq_connection_events_total", "connected", l -> l.stats().connections()),
          new ZmqField(
              "kvrouter_zmq_connection_events_total", "reconnected", l -> l.stats().reconnects()),
          new ZmqField(
              "kvrouter_zmq_connection_events_total", "disconnected", l -> l.stats().disconnects()),
          new ZmqField("kvrouter_zmq_events_applied_total", null, ZmqListener::applied),
          new ZmqField(
              "kvrouter_zmq_events_dropped_total", "foreign_rank", ZmqListener::droppedForeignRank),
          new ZmqField(
              "kvrouter_zmq_events_dropped_total",
              "unregistered",
              ZmqListener::droppedUnregistered),
          new ZmqField(
              "kvrouter_zmq_events_dropped_total", "refused", l -> l.stats().refusedEvents()),
          new ZmqField(
              "kvrouter_zmq_events_dropped_total", "skipped", l -> l.stats().skippedEvents()),
          new ZmqField(
              "kvrouter_zmq_events_dropped_total",
              "placeholder",
              l -> l.stats().placeholderEvents()),
          new ZmqField(
              "kvrouter_zmq_events_dropped_total", "sink_error", l -> l.stats().sinkErrors()));

  private static final Map<String, String[]> ZMQ_HELP =
      Map.ofEntries(
          Map.entry("kvrouter_zmq_messages_total", new String[] {"Live ZMQ messages received"}),
          Map.entry(
              "kvrouter_zmq_batches_total",
              new String[] {"KV event batches decoded and applied (live and replayed)"}),
          Map.entry(
              "kvrouter_zmq_decode_errors_total",
              new String[] {"Batches rejected whole as malformed msgpack"}),
          Map.entry(
              "kvrouter_zmq_bad_frames_total",
              new String[] {"Live messages skipped for their frame shape or an unknown topic"}),
          Map.entry(
              "kvrouter_zmq_duplicates_total",
              new String[] {"Messages skipped because their sequence number was already applied"}),
          Map.entry(
              "kvrouter_zmq_gaps_total", new String[] {"Sequence gaps seen on the live socket"}),
          Map.entry(
              "kvrouter_zmq_lost_messages_total",
              new String[] {"Sequence numbers never applied (no replay, or not in the replay)"}),
          Map.entry("kvrouter_zmq_replays_total", new String[] {"Replay requests sent"}),
          Map.entry(
              "kvrouter_zmq_replayed_messages_total",
              new String[] {"Batches received through replay and applied"}),
          Map.entry(
              "kvrouter_zmq_replay_failures_total",
              new String[] {"Replays abandoned (no answer in time, malformed answer)"}),
          Map.entry(
              "kvrouter_zmq_restarts_total",
              new String[] {"Engine restarts detected (the rank's blocks were cleared)"}),
          Map.entry(
              "kvrouter_zmq_tail_probes_total",
              new String[] {
                "Replays asked because the engine fell silent after publishing (a lost tail of"
                    + " a burst shows no gap until the engine publishes again)"
              }),
          Map.entry(
              "kvrouter_zmq_tail_recovered_messages_total",
              new String[] {
                "Batches those probes found in the engine's replay buffer: the lost tail of a"
                    + " burst, recovered"
              }),
          Map.entry(
              "kvrouter_zmq_event_lag_microseconds_total",
              new String[] {
                "Sum over applied batches of the time from the engine's publish (the batch's ts)"
                    + " to applied, in microseconds; divided by kvrouter_zmq_event_lag_batches_total"
                    + " it is the mean event lag"
              }),
          Map.entry(
              "kvrouter_zmq_event_lag_batches_total",
              new String[] {"Applied batches with a timestamp (in the event lag sum)"}),
          Map.entry(
              "kvrouter_zmq_connection_events_total",
              new String[] {
                "Connections of the live socket: completed (connected), of those made again"
                    + " after a loss (reconnected), and lost (disconnected)",
                "event"
              }),
          Map.entry(
              "kvrouter_zmq_events_applied_total",
              new String[] {"Router events applied to the index"}),
          Map.entry(
              "kvrouter_zmq_events_dropped_total",
              new String[] {
                "Events not applied: another rank than the registered one (foreign_rank), rank"
                    + " unregistered meanwhile, block size other than the registered one"
                    + " (refused), unknown type or secondary KV cache group (skipped), offloaded"
                    + " blocks announced without token ids (placeholder), sink failure",
                "reason"
              }));

  /** Counters of listeners that were stopped, by label values, in ZMQ_FIELDS order. */
  private final Map<List<String>, long[]> retiredZmq = new ConcurrentHashMap<>();

  private final Supplier<Collection<ModelIndex>> indexes;

  ServerMetrics(Supplier<Collection<ModelIndex>> indexes) {
    this.indexes = indexes;
    httpEventsReceived = eventsReceived.labelValues("http");
    zmqEventsReceived = eventsReceived.labelValues("zmq");
    decodeErrors.labelValues("http");
    registerZmqFamilies();
    registerZmqStaleness();
    registerNatsFamilies();
    registerSyncFamilies();
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
                io.kvrouter.index.TieredIndex t = m.tiers();
                if (t == null) continue;
                for (io.kvrouter.index.Tier tier : io.kvrouter.index.Tier.values()) {
                  long n =
                      tier == io.kvrouter.index.Tier.DEVICE
                          ? t.stats().blocksIndexed()
                          : t.blockCount(tier);
                  cb.call(
                      n,
                      m.key.modelName(),
                      m.key.routingGroup(),
                      tier.name().toLowerCase(java.util.Locale.ROOT));
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
                                io.kvrouter.index.Tier.of(t)
                                    .name()
                                    .toLowerCase(java.util.Locale.ROOT));
                          }
                        }))
        .register(registry);
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
    JvmMetrics.builder().register(registry);
  }

  /** Registers the gauges of the request bodies being received (HttpPlumbing); call it once. */
  void bodies(BodyBudget budget) {
    GaugeWithCallback.builder()
        .name("kvrouter_http_body_bytes_held")
        .help(
            "Bytes the request bodies being received hold now (their buffers), across all"
                + " connections")
        .callback(cb -> cb.call(budget.held()))
        .register(registry);
    GaugeWithCallback.builder()
        .name("kvrouter_http_body_bytes_budget")
        .help(
            "Most bytes request bodies may hold at once (--max-inflight-body-size); a body that"
                + " would grow past it gets 503")
        .callback(cb -> cb.call(budget.capacity()))
        .register(registry);
    GaugeWithCallback.builder()
        .name("kvrouter_http_bodies_reading")
        .help("Request bodies being received now, also those whose first byte has not come")
        .callback(cb -> cb.call(budget.reading()))
        .register(registry);
  }

  private void registerZmqFamilies() {
    Map<String, List<Integer>> byFamily = new java.util.LinkedHashMap<>();
    for (int i = 0; i < ZMQ_FIELDS.size(); i++) {
      byFamily.computeIfAbsent(ZMQ_FIELDS.get(i).family(), f -> new ArrayList<>()).add(i);
    }
    for (Map.Entry<String, List<Integer>> f : byFamily.entrySet()) {
      String[] help = ZMQ_HELP.get(f.getKey());
      String[] labels =
          help.length == 1
              ? ZMQ_LABELS
              : java.util.Arrays.copyOf(ZMQ_LABELS, ZMQ_LABELS.length + 1);
      if (help.length > 1) labels[ZMQ_LABELS.length] = help[1];
      List<Integer> fields = f.getValue();
      CounterWithCallback.builder()
          .name(f.getKey())
          .help(help[0] + ", per ZMQ listener (registered rank with an endpoint)")
          .labelNames(labels)
          .callback(
              cb -> {
                for (Map.Entry<List<String>, long[]> e : zmqValues().entrySet()) {
                  List<String> l = e.getKey();
                  for (int i : fields) {
                    String extra = ZMQ_FIELDS.get(i).extra();
                    if (extra == null) {
                      cb.call(e.getValue()[i], l.get(0), l.get(1), l.get(2), l.get(3));
                    } else {
                      cb.call(e.getValue()[i], l.get(0), l.get(1), l.get(2), l.get(3), extra);
                    }
                  }
                }
              })
          .register(registry);
    }
    zmqGauge(
        "kvrouter_zmq_last_sequence",
        "Sequence number of the last batch dealt with per ZMQ listener (-1: none yet)",
        ZmqListener::lastSequence);
  }

  private void registerZmqStaleness() {
    zmqGauge(
        "kvrouter_zmq_seconds_since_last_message",
        "Seconds since the engine's last live ZMQ message per listener (-1: none yet). Nothing"
            + " announces an engine's last sequence: a lost tail shows only as silence here,"
            + " or as kvrouter_zmq_tail_recovered_messages_total with a replay endpoint",
        ZmqListener::secondsSinceLastMessage);
  }

  /** A gauge of {@code value} per live ZMQ listener, labelled with its model, group and rank. */
  private void zmqGauge(String name, String help, ToDoubleFunction<ZmqListener> value) {
    GaugeWithCallback.builder()
        .name(name)
        .help(help)
        .labelNames(ZMQ_LABELS)
        .callback(
            cb -> {
              for (ModelIndex m : indexes.get()) {
                for (Registration r : m.registrations.values()) {
                  if (r.listener() == null) continue;
                  List<String> l = zmqLabels(m.key, r.listener());
                  cb.call(
                      value.applyAsDouble(r.listener()), l.get(0), l.get(1), l.get(2), l.get(3));
                }
              }
            })
        .register(registry);
  }

  private static List<String> zmqLabels(ModelKey key, ZmqListener l) {
    return List.of(
        key.modelName(),
        key.routingGroup(),
        Long.toUnsignedString(l.worker().workerId()),
        Integer.toString(l.worker().dpRank()));
  }

  private static long[] read(ZmqListener l) {
    long[] v = new long[ZMQ_FIELDS.size()];
    for (int i = 0; i < v.length; i++) v[i] = ZMQ_FIELDS.get(i).value().applyAsLong(l);
    return v;
  }

  private static long[] sum(long[] a, long[] b) {
    long[] v = a.clone();
    for (int i = 0; i < v.length; i++) v[i] += b[i];
    return v;
  }

  /** Live listeners' counters plus the retired ones, by label values. */
  private Map<List<String>, long[]> zmqValues() {
    Map<List<String>, long[]> out = new java.util.HashMap<>(retiredZmq);
    for (ModelIndex m : indexes.get()) {
      for (Registration r : m.registrations.values()) {
        if (r.listener() != null) {
          out.merge(zmqLabels(m.key, r.listener()), read(r.listener()), ServerMetrics::sum);
        }
      }
    }
    return out;
  }

  /** Keeps the counters of a listener that was stopped, so the counters stay monotonic. */
  void retire(ModelKey key, ZmqListener l) {
    retiredZmq.merge(zmqLabels(key, l), read(l), ServerMetrics::sum);
  }

  /** {@code kvrouter_events_received_total{source="zmq"}}. */
  CounterDataPoint zmqEventsReceived() {
    return zmqEventsReceived;
  }

  private Map<ModelKey, IndexStats> statsByKey(Collection<ModelIndex> live) {
    Map<ModelKey, IndexStats> out = new java.util.TreeMap<>(retired);
    for (ModelIndex m : live) out.merge(m.key, m.router.index().stats(), IndexStats::plus);
    return out;
  }

  /** Blocks each tier dropped past --max-tier-blocks, live and retired indexes, by index. */
  private Map<ModelKey, long[]> tierEvictionsByKey(Collection<ModelIndex> live) {
    Map<ModelKey, long[]> out = new java.util.TreeMap<>(retiredTierEvictions);
    for (ModelIndex m : live) {
      long[] v = m.tierEvictions();
      if (v != null) out.merge(m.key, v, ServerMetrics::sum);
    }
    return out;
  }

  private final Map<ModelKey, long[]> retiredTierEvictions = new ConcurrentHashMap<>();

  /** Remembers the counters of an index that is being dropped. */
  void retire(ModelIndex m) {
    retired.merge(m.key, m.router.index().stats(), IndexStats::plus);
    long[] tierEvictions = m.tierEvictions();
    if (tierEvictions != null) {
      retiredTierEvictions.merge(m.key, tierEvictions, ServerMetrics::sum);
    }
    if (m.nats != null) retiredNats.merge(m.key, readNats(m.nats), ServerMetrics::sum);
    if (m.sync != null) retiredSync.merge(m.key, readSync(m.sync.stats()), ServerMetrics::sum);
  }

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
  private final Map<ModelKey, long[]> retiredSync = new ConcurrentHashMap<>();

  private static long[] readSync(NatsSequenceSync.Stats st) {
    long[] v = new long[SYNC_FIELDS.size() + 2];
    for (int i = 0; i < SYNC_FIELDS.size(); i++) v[i] = SYNC_FIELDS.get(i).value().applyAsLong(st);
    v[SYNC_FIELDS.size()] = st.lagCount();
    v[SYNC_FIELDS.size() + 1] = st.lagSumMillis();
    return v;
  }

  private Map<ModelKey, long[]> syncByKey() {
    Map<ModelKey, long[]> all = new java.util.TreeMap<>(retiredSync);
    for (ModelIndex m : indexes.get()) {
      if (m.sync != null) all.merge(m.key, readSync(m.sync.stats()), ServerMetrics::sum);
    }
    return all;
  }

  private void registerSyncFamilies() {
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
                    io.prometheus.metrics.model.snapshots.Quantiles.EMPTY,
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
  private final Map<ModelKey, long[]> retiredNats = new ConcurrentHashMap<>();

  private static long[] readNats(NatsEvents.Feed f) {
    NatsReplicaStats st = f.replica().stats();
    long[] v = new long[NATS_FIELDS.size()];
    for (int i = 0; i < v.length; i++) v[i] = NATS_FIELDS.get(i).value().applyAsLong(st);
    return v;
  }

  private void registerNatsFamilies() {
    for (int i = 0; i < NATS_FIELDS.size(); i++) {
      int field = i;
      NatsField f = NATS_FIELDS.get(i);
      CounterWithCallback.builder()
          .name(f.family())
          .help(f.help() + ", per index (serve --events nats://...)")
          .labelNames("model_name", "routing_group")
          .callback(
              cb -> {
                Map<ModelKey, long[]> all = new java.util.TreeMap<>(retiredNats);
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

  /** The findMatches timer of one index. */
  DistributionDataPoint findMatches(ModelKey key) {
    return findMatchesSeconds.labelValues(key.modelName(), key.routingGroup());
  }

  /** Counts one answered HTTP request. */
  void http(String endpoint, int status, long nanos) {
    int c = Math.min(Math.max(status / 100, 1), 5) - 1;
    CounterDataPoint[] counts =
        httpCounts.computeIfAbsent(endpoint, e -> new CounterDataPoint[STATUS_CLASSES.length]);
    CounterDataPoint count = counts[c];
    if (count == null) counts[c] = count = httpRequests.labelValues(endpoint, STATUS_CLASSES[c]);
    count.inc();
    DistributionDataPoint[] times =
        httpTimes.computeIfAbsent(endpoint, e -> new DistributionDataPoint[STATUS_CLASSES.length]);
    DistributionDataPoint time = times[c];
    if (time == null) times[c] = time = httpSeconds.labelValues(endpoint, STATUS_CLASSES[c]);
    time.observe(nanos / 1e9);
  }

  void routed(ModelKey key, long instanceId, int dpRank) {
    routeDecisions
        .labelValues(
            key.modelName(),
            key.routingGroup(),
            Long.toUnsignedString(instanceId),
            Integer.toString(dpRank))
        .inc();
  }

  void routeRejected(ModelKey key, String reason) {
    routeRejections.labelValues(key.modelName(), key.routingGroup(), reason).inc();
  }

  void eventsReceived(int n) {
    httpEventsReceived.inc(n);
  }

  void registrationLog(String op, String outcome) {
    registrationLog.labelValues(op, outcome).inc();
  }

  void natsPublishDuplicates(int n) {
    if (n > 0) natsPublishDuplicates.inc(n);
  }

  void eventBatchRejected(String reason) {
    eventBatchesRejected.labelValues("http", reason).inc();
  }

  void decodeError() {
    decodeErrors.labelValues("http").inc();
  }

  /** The content type of {@link #write}. */
  String contentType() {
    return writer.getContentType();
  }

  /** Writes every metric in the Prometheus text format. */
  void write(OutputStream out) throws IOException {
    writer.write(out, registry.scrape());
  }
}
