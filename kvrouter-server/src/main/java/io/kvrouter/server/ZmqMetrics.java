package io.kvrouter.server;

import io.prometheus.metrics.core.metrics.CounterWithCallback;
import io.prometheus.metrics.core.metrics.GaugeWithCallback;
import io.prometheus.metrics.model.registry.PrometheusRegistry;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Supplier;
import java.util.function.ToDoubleFunction;
import java.util.function.ToLongFunction;

/**
 * The metrics of the ZMQ listeners ({@code kvrouter_zmq_*}), one series per listener (a registered
 * rank with an endpoint), labelled with its model, routing group and rank; part of {@link
 * ServerMetrics}.
 *
 * <pre>
 * Implementation notes
 *
 * Data layout: ZMQ_FIELDS lists every exported counter (its family, an extra label value or
 * null, and how to read it from a listener); families with several fields (connection events,
 * dropped events) get the extra label named in ZMQ_HELP. Counters are read by callbacks at scrape
 * time from the live listeners (through the indexes' registrations), plus retiredZmq: the last
 * counts of listeners that were stopped, by label values, summed in ZMQ_FIELDS order, so that the
 * counters stay monotonic when a rank is registered again. Who writes retiredZmq: retire(), from
 * the thread that stops a listener; who reads: the scrape's thread. Thread-safe (a
 * ConcurrentHashMap; the listeners' counters are their own).
 * </pre>
 */
final class ZmqMetrics {
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

  private final PrometheusRegistry registry;
  private final Supplier<Collection<ModelIndex>> indexes;

  /** Registers the ZMQ families in {@code registry}, reading the listeners of {@code indexes}. */
  ZmqMetrics(PrometheusRegistry registry, Supplier<Collection<ModelIndex>> indexes) {
    this.registry = registry;
    this.indexes = indexes;
    registerFamilies();
    registerStaleness();
  }

  private void registerFamilies() {
    Map<String, List<Integer>> byFamily = new LinkedHashMap<>();
    for (int i = 0; i < ZMQ_FIELDS.size(); i++) {
      byFamily.computeIfAbsent(ZMQ_FIELDS.get(i).family(), f -> new ArrayList<>()).add(i);
    }
    for (Map.Entry<String, List<Integer>> f : byFamily.entrySet()) {
      String[] help = ZMQ_HELP.get(f.getKey());
      String[] labels =
          help.length == 1 ? ZMQ_LABELS : Arrays.copyOf(ZMQ_LABELS, ZMQ_LABELS.length + 1);
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

  private void registerStaleness() {
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

  /** Live listeners' counters plus the retired ones, by label values. */
  private Map<List<String>, long[]> zmqValues() {
    Map<List<String>, long[]> out = new HashMap<>(retiredZmq);
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

  /** Forgets the stopped listeners' counters of an index that was dropped. */
  void forget(ModelKey key) {
    retiredZmq
        .keySet()
        .removeIf(l -> l.get(0).equals(key.modelName()) && l.get(1).equals(key.routingGroup()));
  }
}
