package io.kvrouter.cli;

import io.kvrouter.discovery.DiscoveryStatus;
import io.kvrouter.discovery.RemovalReason;
import io.prometheus.metrics.core.metrics.Counter;
import io.prometheus.metrics.core.metrics.CounterWithCallback;
import io.prometheus.metrics.core.metrics.GaugeWithCallback;
import io.prometheus.metrics.model.registry.PrometheusRegistry;
import java.util.function.Supplier;

/**
 * The discovery's Prometheus metrics (names: docs/deploy.md), in the server's registry so that one
 * {@code GET /metrics} has them with the rest.
 *
 * <pre>
 * Implementation notes
 *
 * The gauges and the discovery's own counters are callbacks that read the discovery's status at
 * scrape time (nothing while the discovery has not started: status() is null then); removals and
 * drain timeouts are counted here by the sinks, on the discovery's thread and the gateway's drain
 * thread (the Prometheus client's data points are thread-safe).
 * </pre>
 */
final class DiscoveryMetrics {
  private final Counter removals;
  private final Counter drainTimeouts;

  DiscoveryMetrics(PrometheusRegistry r, Supplier<DiscoveryStatus> status) {
    gauge(
        r,
        status,
        "kvrouter_discovery_connected",
        "1 while the discovery's watches are open, 0 while it cannot follow the API server (the engines last known stay registered)",
        s -> s.connected() ? 1 : 0);
    gauge(
        r,
        status,
        "kvrouter_discovery_engines",
        "Engines (ranks) discovered and registered",
        s -> s.engines());
    gauge(
        r,
        status,
        "kvrouter_discovery_draining",
        "Engines removed whose drain has not finished",
        s -> s.draining());
    gauge(
        r,
        status,
        "kvrouter_discovery_skipped_pods",
        "Selected pods skipped for invalid kvrouter.io annotations or ports (GET /discovery names the reasons)",
        s -> s.skippedPods().size());
    gauge(
        r,
        status,
        "kvrouter_discovery_last_sync_timestamp_seconds",
        "When the pods were last listed in full (Unix time)",
        s -> s.lastSync() == null ? Double.NaN : s.lastSync().toEpochMilli() / 1000.0);
    counter(
        r,
        status,
        "kvrouter_discovery_lists_total",
        "Full lists of the pods (the first, and one after every watch that expired or broke)",
        s -> s.lists());
    counter(
        r,
        status,
        "kvrouter_discovery_invalid_pods_total",
        "Times a selected pod was found invalid",
        s -> s.invalidPods());
    counter(
        r,
        status,
        "kvrouter_discovery_add_failures_total",
        "Engines the router refused to register (retried while the pod stays Ready)",
        s -> s.addFailures());
    removals =
        Counter.builder()
            .name("kvrouter_discovery_removals_total")
            .help(
                "Engines taken out, by why: not_ready, terminating, gone, unselected, invalid, changed")
            .labelNames("reason")
            .register(r);
    drainTimeouts =
        Counter.builder()
            .name("kvrouter_discovery_drain_timeouts_total")
            .help(
                "Engines unregistered with requests still in flight after --discovery-drain-seconds")
            .register(r);
  }

  private interface Value {
    double of(DiscoveryStatus s);
  }

  private static void gauge(
      PrometheusRegistry r, Supplier<DiscoveryStatus> status, String name, String help, Value v) {
    GaugeWithCallback.builder()
        .name(name)
        .help(help)
        .callback(
            cb -> {
              DiscoveryStatus s = status.get();
              if (s != null) cb.call(v.of(s));
            })
        .register(r);
  }

  private static void counter(
      PrometheusRegistry r, Supplier<DiscoveryStatus> status, String name, String help, Value v) {
    CounterWithCallback.builder()
        .name(name)
        .help(help)
        .callback(
            cb -> {
              DiscoveryStatus s = status.get();
              if (s != null) cb.call(v.of(s));
            })
        .register(r);
  }

  /** An engine is being taken out. */
  void removed(RemovalReason reason) {
    removals.labelValues(reason.wireName()).inc();
  }

  /** A drain ended at its bound with requests still in flight. */
  void drainTimedOut() {
    drainTimeouts.inc();
  }
}
