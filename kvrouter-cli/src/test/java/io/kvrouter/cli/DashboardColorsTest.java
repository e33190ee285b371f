package io.kvrouter.cli;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.server.KvRouterServer;
import io.kvrouter.sim.Policy;
import io.kvrouter.sim.report.HtmlReport;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/**
 * GET /dashboard (kvrouter-server's dashboard.html) draws with the simulate report's colours: its
 * palette is the one HtmlReport gives the policies, in the same order.
 */
class DashboardColorsTest {
  @Test
  void theDashboardPaletteIsTheSimulateReportsOne() throws IOException {
    String page;
    try (InputStream in = KvRouterServer.class.getResourceAsStream("dashboard.html")) {
      assertThat(in).as("dashboard.html in kvrouter-server").isNotNull();
      page = new String(in.readAllBytes(), StandardCharsets.UTF_8);
    }
    Matcher m = Pattern.compile("const COLORS = \\[([^\\]]*)\\]").matcher(page);
    assertThat(m.find()).isTrue();
    List<String> page6 = new ArrayList<>();
    for (String c : m.group(1).split(",")) page6.add(c.trim().replace("\"", ""));
    List<String> report = new ArrayList<>();
    for (Policy p : Policy.values()) {
      String c = HtmlReport.policyColor(p.cliName());
      if (report.contains(c)) break; // the report's palette starts over
      report.add(c);
    }
    assertThat(report).hasSizeGreaterThanOrEqualTo(6);
    assertThat(page6).isEqualTo(report.subList(0, page6.size())).hasSize(6);
  }
}
