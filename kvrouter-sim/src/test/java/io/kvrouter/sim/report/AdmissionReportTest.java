package io.kvrouter.sim.report;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.sim.AdmissionComparison;
import io.kvrouter.sim.AdmissionResult;
import io.kvrouter.sim.AdmissionSimulation;
import io.kvrouter.sim.TenantRule;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * {@link AdmissionReport}'s table under simulate's title and under another command's (bench fleet
 * --admission prints live runs in model time), on hand-made results.
 */
class AdmissionReportTest {
  private static AdmissionResult result(String label, AdmissionSimulation.Mode mode, int lost) {
    return new AdmissionResult(
        label,
        mode,
        4,
        4 - lost,
        0,
        0,
        0,
        lost,
        0,
        new int[] {2, 2},
        new double[] {1500, 500},
        new double[][] {{500, 1500}, {700}},
        new double[] {100, 100},
        new double[2],
        3,
        2.0,
        3.0,
        0.25,
        new double[] {0.25, 0.25},
        1.5,
        new int[2][2],
        1_000_000);
  }

  private static AdmissionComparison comparison(int lost) {
    return new AdmissionComparison(
        "t.jsonl",
        new TenantRule(2, 1, 0.5, false, 0),
        new AdmissionSimulation.Settings(16, 30, 1024, 2000),
        2,
        result("unloaded fifo", AdmissionSimulation.Mode.FIFO, 0),
        List.of(result("fair-cost", AdmissionSimulation.Mode.FAIR_COST, lost)),
        List.of(),
        new double[] {Double.NaN, Double.NaN},
        1_000_000_000L);
  }

  private static String print(AdmissionComparison c, String command) {
    StringWriter w = new StringWriter();
    PrintWriter out = new PrintWriter(w);
    if (command == null) AdmissionReport.print(c, out);
    else AdmissionReport.print(c, out, command, "model");
    out.flush();
    return w.toString();
  }

  @Test
  void theTableNamesItsCommandAndItsClock() {
    String sim = print(comparison(0), null);
    assertThat(sim)
        .startsWith("kvrouter simulate --admission: t.jsonl, 4 requests, load factor 2")
        .contains("TTFT in simulated seconds")
        .contains("nothing lost: yes");
    String live = print(comparison(0), "kvrouter bench fleet --admission");
    assertThat(live)
        .startsWith("kvrouter bench fleet --admission: t.jsonl, 4 requests")
        .contains("TTFT in model seconds")
        .doesNotContain("simulated");
    // the rows: high band p50 / p90 / p99 in seconds, Jain of equal served cost, good/s = 3 / 2 s
    assertThat(live.lines().filter(l -> l.startsWith("fair-cost")).findFirst().orElseThrow())
        .contains("0.50 / 1.50 / 1.50")
        .contains("1.000")
        .contains("1.50");
  }

  @Test
  void aLostRequestIsSaid() {
    assertThat(print(comparison(1), "kvrouter bench fleet --admission"))
        .contains("nothing lost: NO");
  }
}
