package io.kvrouter.harness;

import java.util.Locale;

/**
 * Whether a {@code bench fleet} run measured the fleet or the machine: a run whose client sent
 * requests late, read its streams late, whose routers lost KV events, or whose machine was taken by
 * a hypervisor, reports latencies (and routing quality) that are not the policy's. Such a run is
 * marked invalid with every reason; the reports print a warning and the JSON says {@code "valid":
 * false}.
 *
 * <pre>
 * Implementation notes
 *
 * A pure function of a finished PolicyRun (judge() fills run.invalid). The limits are constants,
 * documented with the bench (docs/SIMULATION.md, "Did it keep up?"). They are set from what the
 * pacing and the engines promise (a request sent within 100 ms of its due time; one token per
 * decode step, a millisecond or more apart) rather than from runs on an idle machine, which were
 * not measured when they were set.
 * </pre>
 */
final class RunValidity {
  /** p99 of requests' lateness against the schedule, wall ms. */
  static final double MAX_SEND_LATE_P99_MS = 100;

  /** Share of token gaps read in a burst (FleetLoad.BURST_NANOS). */
  static final double MAX_BURST_GAP_SHARE = 0.10;

  /** Share of the machine's CPU time a hypervisor gave to other guests. */
  static final double MAX_STEAL = 0.05;

  private RunValidity() {}

  /** Fills {@code run.invalid} with every reason the run cannot be trusted. */
  static void judge(PolicyRun run) {
    double late = Percentiles.pct(run.sendLateMs, 99);
    if (late > MAX_SEND_LATE_P99_MS) {
      run.invalid.add(
          String.format(
              Locale.ROOT,
              "the client sent requests late: p99 %.0f ms behind the schedule (limit %.0f ms);"
                  + " the machine, or --clients, could not keep up with the trace's pace",
              late,
              MAX_SEND_LATE_P99_MS));
    }
    if (run.tokenGaps > 0 && (double) run.burstGaps / run.tokenGaps > MAX_BURST_GAP_SHARE) {
      run.invalid.add(
          String.format(
              Locale.ROOT,
              "the client read its streams late: %.0f %% of token gaps under %d µs (limit %.0f %%);"
                  + " its ITL and TTFT include the client's own delay",
              100.0 * run.burstGaps / run.tokenGaps,
              FleetLoad.BURST_NANOS / 1000,
              100 * MAX_BURST_GAP_SHARE));
    }
    if (run.replaysAbandoned > 0 || run.eventsLost > 0) {
      run.invalid.add(
          "the routers missed KV events: "
              + Math.max(0, run.replaysAbandoned)
              + " replay(s) abandoned, "
              + Math.max(0, run.eventsLost)
              + " event batch(es) never applied; their indexes, and so kv's choices, were"
              + " incomplete");
    }
    if (run.cpu != null && run.cpu.steal() > MAX_STEAL) {
      run.invalid.add(
          String.format(
              Locale.ROOT,
              "the hypervisor took %.1f %% of the CPU time (steal; limit %.0f %%)",
              100 * run.cpu.steal(),
              100 * MAX_STEAL));
    }
  }
}
