package io.kvrouter.sim.report;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.mockengine.TimingModel;
import io.kvrouter.sim.Policy;
import io.kvrouter.sim.PolicyResult;
import io.kvrouter.sim.PooledCeiling;
import io.kvrouter.sim.Progress;
import io.kvrouter.sim.RemovedEvents;
import io.kvrouter.sim.SimConfig;
import io.kvrouter.sim.SimulationResult;
import io.kvrouter.sim.SyntheticTrace;
import io.kvrouter.sim.Verification;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The HTML report's structure: metadata, one summary, a load plot per policy, percentile markers,
 * the hit rate over time, and bar labels clear of the ceiling line. Structure, not pixels.
 */
class HtmlReportTest {
  private static final HtmlReport.Meta META =
      new HtmlReport.Meta(
          "9.9.9",
          "abc1234",
          "kvrouter simulate --requests 300 --trace 'my <trace>.jsonl'",
          "2026-12-01 10:00:00 UTC");
  private static SimulationResult result;

  /**
   * simulate's default policies without a host tier or KV cache groups (kv-device runs only with
   * --host-blocks, kv-main only with --kv-groups).
   */
  private static final List<Policy> POLICIES =
      Arrays.stream(Policy.values())
          .filter(p -> p != Policy.KV_DEVICE && p != Policy.KV_MAIN)
          .toList();

  @BeforeAll
  static void simulate() {
    SimConfig cfg =
        SimConfig.builder()
            .workers(4)
            .gpuBlocks(1024)
            .blockSize(64)
            .timing(new TimingModel(5, 50, 20, 16))
            .seed(7)
            .verifyPrompts(100)
            .loadSamples(50)
            .removedEvents(RemovedEvents.PER_BLOCK)
            .build();
    result =
        SimulationResult.run(
            "synthetic", SyntheticTrace.conversations(50, 6, 2_000), cfg, POLICIES, Progress.off());
  }

  private static int count(String s, String what) {
    int n = 0;
    for (int i = s.indexOf(what); i >= 0; i = s.indexOf(what, i + what.length())) n++;
    return n;
  }

  @Test
  void theRunsMetadataIsShownAndEscaped() {
    String html = HtmlReport.render(result, META);
    assertThat(html)
        .contains("<th>kvrouter</th><td>9.9.9, commit <code>abc1234</code></td>")
        .contains(
            "<th>command</th><td><code>kvrouter simulate --requests 300 --trace 'my"
                + " &lt;trace&gt;.jsonl'</code></td>")
        .contains("<th>date</th><td>2026-12-01 10:00:00 UTC</td>");
    String dev =
        HtmlReport.render(result, new HtmlReport.Meta(null, null, "kvrouter simulate", "d"));
    assertThat(dev)
        .contains("<th>kvrouter</th><td>development build</td>")
        .doesNotContain("commit");
  }

  @Test
  void metaQuotesWhatTheShellWouldSplit() {
    assertThat(HtmlReport.shellQuote("--requests")).isEqualTo("--requests");
    assertThat(HtmlReport.shellQuote("/tmp/r.html")).isEqualTo("/tmp/r.html");
    assertThat(HtmlReport.shellQuote("a b")).isEqualTo("'a b'");
    assertThat(HtmlReport.shellQuote("it's")).isEqualTo("'it'\\''s'");
    assertThat(HtmlReport.shellQuote("")).isEqualTo("''");
    HtmlReport.Meta m = HtmlReport.Meta.of(List.of("--requests", "10", "--trace", "x y"));
    assertThat(m.commandLine()).isEqualTo("kvrouter simulate --requests 10 --trace 'x y'");
    assertThat(m.date()).matches("\\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d:\\d\\d UTC");
  }

  @Test
  void everyPolicyHasALoadBandWithItsMedianAndNoPerRankLines() {
    String html = HtmlReport.render(result, META);
    int policies = result.policies().size();
    assertThat(policies).isEqualTo(POLICIES.size());
    assertThat(count(html, "<svg class=\"load\"")).isEqualTo(policies);
    assertThat(count(html, "<polygon class=\"band\"")).isEqualTo(policies);
    assertThat(count(html, "<polyline class=\"median\"")).isEqualTo(policies);
    for (PolicyResult r : result.policies()) {
      assertThat(html).contains("id=\"load-" + r.policy().cliName() + "\"");
    }
    // rank names appear nowhere: no legend entry or line per rank
    assertThat(html).doesNotContain(">w0<").doesNotContain(">w3<");
  }

  @Test
  void theTtftPlotMarksP50P90AndP99OfEveryPolicy() {
    String html = HtmlReport.render(result, META);
    assertThat(count(html, "<line class=\"pguide\"")).isEqualTo(3);
    assertThat(count(html, "<circle class=\"pmark\"")).isEqualTo(3 * result.policies().size());
    for (PolicyResult r : result.policies()) {
      for (int p : new int[] {50, 90, 99}) {
        assertThat(html)
            .contains(
                "<title>"
                    + r.policy().cliName()
                    + " p"
                    + p
                    + ": "
                    + TextReport.ms(r.ttftPercentile(p))
                    + "</title>");
      }
    }
  }

  @Test
  void theHitRateOverTimeHasALinePerPolicyAndTheCeiling() {
    String html = HtmlReport.render(result, META);
    assertThat(html).contains("<svg class=\"hit-rate-over-time\"");
    assertThat(count(html, "<polyline class=\"hits\"")).isEqualTo(result.policies().size());
    assertThat(count(html, "<polyline class=\"hits-ceiling\"")).isEqualTo(1);
    Matcher m = Pattern.compile("<polyline class=\"hits\"[^>]* points=\"([^\"]*)\"").matcher(html);
    while (m.find()) assertThat(m.group(1).split(" ")).as("points").hasSizeGreaterThan(2);
  }

  @Test
  void theSummaryIsOneSentenceForEveryPolicyThatPassed() {
    String html = HtmlReport.render(result, META);
    assertThat(count(html, "Index equals caches")).isEqualTo(1);
    assertThat(html).contains("Index equals caches</span> for every policy (5)");
    assertThat(count(html, "<span class=\"ok\">equal</span>")).isEqualTo(result.policies().size());
  }

  @Test
  void aFailedCheckIsListedApartWithItsProblems() {
    List<PolicyResult> rs = new ArrayList<>(result.policies());
    PolicyResult kv = rs.get(0);
    rs.set(0, with(kv, kv.cachedTokens(), new Verification(false, 4, 10, 5, List.of("w1 <x>"))));
    String html = HtmlReport.render(withPolicies(rs, result.pooled()), META);
    assertThat(html)
        .contains("Index differs from the caches</span> for kv")
        .contains("<li>w1 &lt;x&gt;</li>")
        .contains("Index equals caches</span> for round-robin, random, least-loaded and approx")
        .contains("<span class=\"bad\">differs</span>");
  }

  /** Bars whose tops fall just under, at and over the ceiling: no value label crosses the line. */
  @Test
  void noBarLabelCrossesTheCeilingLine() {
    PooledCeiling pooled = result.pooled();
    double ceiling = pooled.hitRate();
    int checked = 0;
    for (int shift = 0; shift < 8; shift++) {
      List<PolicyResult> rs = new ArrayList<>();
      for (int i = 0; i < result.policies().size(); i++) {
        PolicyResult r = result.policies().get(i);
        // from 0.2 points over the ceiling to about 3.8 points under it, in 0.1-point steps
        double rate = ceiling + 0.002 - 0.001 * (shift * result.policies().size() + i);
        rs.add(with(r, Math.round(rate * r.promptTokens()), r.verification()));
      }
      String html = HtmlReport.render(withPolicies(rs, pooled), META);
      String svg = html.substring(html.indexOf("<svg class=\"hit-rate\""));
      svg = svg.substring(0, svg.indexOf("</svg>"));
      Matcher line = Pattern.compile("<line class=\"ceiling\"[^>]* y1=\"([0-9.]+)\"").matcher(svg);
      assertThat(line.find()).isTrue();
      double py = Double.parseDouble(line.group(1));
      Matcher label = Pattern.compile("<text class=\"value\"[^>]* y=\"([0-9.]+)\"").matcher(svg);
      while (label.find()) {
        double y = Double.parseDouble(label.group(1)); // the baseline of 12 px text
        // the text spans about 12 px above its baseline and 3 below
        assertThat(py < y - 13 || py > y + 4)
            .as("ceiling at y=%s, label baseline at y=%s", py, y)
            .isTrue();
        checked++;
      }
    }
    assertThat(checked).isEqualTo(8 * result.policies().size());
  }

  private static PolicyResult with(PolicyResult r, long cachedTokens, Verification v) {
    return new PolicyResult(
        r.policy(),
        r.requests(),
        r.completed(),
        r.rejected(),
        r.promptTokens(),
        cachedTokens,
        r.routedOverlapTokens(),
        r.outputTokens(),
        r.ttftMs(),
        r.makespanSec(),
        r.meanLoad(),
        r.prefillUtilisation(),
        r.load(),
        r.hits(),
        r.eventsPublished(),
        r.eventsApplied(),
        v,
        r.wallNanos());
  }

  private static SimulationResult withPolicies(List<PolicyResult> rs, PooledCeiling pooled) {
    return new SimulationResult(
        result.trace(),
        result.requests(),
        result.traceSpanSec(),
        result.config(),
        pooled,
        List.copyOf(rs),
        result.wallNanos());
  }
}
