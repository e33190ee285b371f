package io.kvrouter.harness;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.kvrouter.sim.trace.TracePrompts;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * {@code bench fleet --compare-simulate}: {@code kvrouter simulate} on the same trace, fleet and
 * timing model, run in this JVM through the command line the bench runs under, its JSON kept for
 * the reports.
 *
 * <pre>
 * Implementation notes
 *
 * simulate gets the fleet's flags under its own names (--workers for --engines ...) plus --json
 * --no-report --quiet; with --max-output-tokens the capped trace goes to a temporary file
 * (deleted afterwards, also on failure), so simulate replays the same requests. Its stdout is the
 * JSON document; a nonzero exit with an empty stdout is an IllegalStateException carrying its
 * stderr (an exit of 1 with a document, an index check that failed, still compares). Stateless.
 * </pre>
 */
final class SimulateComparison {
  private static final ObjectMapper JSON = new ObjectMapper();

  private SimulateComparison() {}

  /** simulate's JSON for the settings' fleet and {@code prompts}. */
  static JsonNode run(FleetBench.Settings s, TracePrompts prompts, FleetBench.Cli cli)
      throws Exception {
    List<String> a = new ArrayList<>();
    a.add("simulate");
    Path capped = null;
    if (s.maxOutputTokens() > 0) {
      // simulate replays the same requests with the same cap
      capped = Files.createTempFile("kvrouter-fleet-trace", ".jsonl");
      prompts.writeCapped(capped, s.maxOutputTokens());
      a.addAll(List.of("--trace", capped.toString()));
    } else if (s.trace() != null) {
      a.addAll(List.of("--trace", s.trace().toString()));
    }
    a.addAll(
        List.of(
            "--requests",
            Integer.toString(s.requests()),
            "--policies",
            String.join(",", s.policies()),
            "--workers",
            Integer.toString(s.engines()),
            "--gpu-blocks",
            Integer.toString(s.gpuBlocks()),
            "--block-size",
            Integer.toString(s.blockSize()),
            "--speedup",
            Double.toString(s.speedup()),
            "--prefill-base-ms",
            Double.toString(s.prefillBaseMs()),
            "--prefill-ms-per-1k-tokens",
            Double.toString(s.prefillMsPer1k()),
            "--decode-ms-per-token",
            Double.toString(s.decodeMsPerToken()),
            "--max-batch",
            Integer.toString(s.maxBatch()),
            "--seed",
            Long.toString(s.seed()),
            "--json",
            "--no-report",
            "--quiet"));
    StringWriter so = new StringWriter();
    StringWriter se = new StringWriter();
    int rc;
    try {
      rc = cli.run(new PrintWriter(so), new PrintWriter(se), a.toArray(String[]::new));
    } finally {
      if (capped != null) Files.deleteIfExists(capped);
    }
    if (rc != 0 && so.toString().isBlank()) {
      throw new IllegalStateException("simulate failed (" + rc + "): " + se);
    }
    return JSON.readTree(so.toString());
  }

  /** simulate's result for {@code policy}, or null (also when there is no comparison). */
  static JsonNode policy(JsonNode sim, String policy) {
    if (sim == null) return null;
    for (JsonNode p : sim.path("policies")) {
      if (policy.equals(p.path("policy").asText())) return p;
    }
    return null;
  }
}
