package io.kvrouter.harness;

import static io.kvrouter.harness.Percentiles.pct;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.PrintWriter;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * {@code bench fleet --engine-kind llama-cpp}'s results as a text table or a JSON document.
 *
 * <pre>
 * Implementation notes
 *
 * Pure functions of the settings, the workload and the policies' runs (read only). The table:
 * one row per policy (requests, answered, errors, mean prompt tokens, engine-reported and predicted hit rate, TTFT
 * p50/p90/mean in wall milliseconds at the client, requests per engine), then the TTFT p50 of
 * every other policy over kv's, then the failed requests' reasons. The JSON: the setup, one
 * object per policy, and ttft_p50_over_kv (policy -> ratio). Field names are what scripts read:
 * keep them. A ratio needs kv among the policies and both p50s; otherwise it is left out.
 * </pre>
 */
final class ChatReport {
  private static final ObjectMapper JSON = new ObjectMapper();

  private ChatReport() {}

  static void printTable(PrintWriter out, List<ChatRun> runs) {
    out.println();
    out.println(
        "TTFT: wall time at the client, sending to the first content chunk; hit rate: the engines'"
            + " cached_tokens over prompt_tokens (usage); predicted: the router's overlap");
    out.printf(
        Locale.ROOT,
        "%-13s %8s %8s %6s %11s %9s %9s %10s %10s %10s  %s%n",
        "policy",
        "requests",
        "answered",
        "errors",
        "prompt mean",
        "hit rate",
        "predicted",
        "TTFT p50",
        "p90",
        "mean",
        "requests per engine");
    for (ChatRun r : runs) {
      double[] t = r.ttftMs();
      out.printf(
          Locale.ROOT,
          "%-13s %8d %8d %6d %11.0f %8.1f%% %8.1f%% %10s %10s %10s  %s%n",
          r.policy,
          r.requests(),
          r.answered(),
          r.requests() - r.answered(),
          r.answered() == 0 ? Double.NaN : (double) r.promptTokens() / r.answered(),
          100 * r.hitRate(),
          100 * r.predictedRate(),
          ms(pct(t, 50)),
          ms(pct(t, 90)),
          ms(r.meanTtftMs()),
          engines(r.byEngine()));
    }
    ChatRun kv = find(runs, "kv");
    if (kv != null) {
      out.println();
      for (ChatRun r : runs) {
        if (r == kv) continue;
        double ratio = ratio(r, kv);
        if (!Double.isNaN(ratio)) {
          out.printf(Locale.ROOT, "TTFT p50 %s / kv: %.2fx%n", r.policy, ratio);
        }
      }
    }
    for (ChatRun r : runs) {
      if (r.errors().isEmpty()) continue;
      out.println();
      out.println(r.policy + ": failed requests by reason");
      r.errors().forEach((why, n) -> out.printf(Locale.ROOT, "  %5d  %s%n", n, why));
    }
  }

  static String json(ChatFleetBench.Settings s, ChatWorkload w, List<ChatRun> runs)
      throws JsonProcessingException {
    ObjectNode root = JSON.createObjectNode();
    root.put("engine_kind", "llama-cpp");
    root.put("engines", s.engines());
    root.put("engine_ctx", s.ctx());
    root.put("block_size", ChatFleetBench.BLOCK_SIZE);
    root.put("kv_source", "predicted");
    ObjectNode wl = root.putObject("workload");
    wl.put("conversations", s.conversations());
    wl.put("turns", s.turns());
    wl.put("requests", w.turns().size());
    wl.put("system_prompts", s.systemPrompts());
    wl.put("system_prompt_words", s.systemPromptWords());
    wl.put("max_tokens", s.maxTokens());
    wl.put("clients", s.clients());
    wl.put("seed", s.seed());
    root.put("repeats", s.repeats());
    root.put("command_line", s.commandLine());
    ArrayNode ps = root.putArray("policies");
    for (ChatRun r : runs) {
      ObjectNode p = ps.addObject();
      p.put("policy", r.policy);
      p.put("requests", r.requests());
      p.put("answered", r.answered());
      p.put("errors", r.requests() - r.answered());
      p.put("prompt_tokens", r.promptTokens());
      p.put("cached_tokens", r.cachedTokens());
      p.put("hit_rate", r.hitRate());
      p.put("predicted_tokens", r.predictedTokens());
      p.put("predicted_rate", r.predictedRate());
      double[] t = r.ttftMs();
      ObjectNode tt = p.putObject("ttft_ms");
      tt.put("p50", pct(t, 50));
      tt.put("p90", pct(t, 90));
      tt.put("mean", r.meanTtftMs());
      tt.put("count", t.length);
      ObjectNode be = p.putObject("requests_per_engine");
      r.byEngine().forEach((k, v) -> be.put(Long.toString(k), v));
      ArrayNode wall = p.putArray("wall_sec");
      for (double x : r.wallSec) wall.add(x);
      ArrayNode pids = p.putArray("pids");
      for (long x : r.pids) pids.add(x);
      ObjectNode er = p.putObject("error_reasons");
      r.errors().forEach(er::put);
    }
    ChatRun kv = find(runs, "kv");
    if (kv != null) {
      ObjectNode ratios = root.putObject("ttft_p50_over_kv");
      for (ChatRun r : runs) {
        double x = ratio(r, kv);
        if (r != kv && !Double.isNaN(x)) ratios.put(r.policy, x);
      }
    }
    return JSON.writerWithDefaultPrettyPrinter().writeValueAsString(root);
  }

  /** {@code r}'s TTFT p50 over {@code kv}'s; NaN when either is unknown or kv's is 0. */
  static double ratio(ChatRun r, ChatRun kv) {
    double a = pct(r.ttftMs(), 50);
    double b = pct(kv.ttftMs(), 50);
    return Double.isNaN(a) || Double.isNaN(b) || b <= 0 ? Double.NaN : a / b;
  }

  private static ChatRun find(List<ChatRun> runs, String policy) {
    for (ChatRun r : runs) if (r.policy.equals(policy)) return r;
    return null;
  }

  private static String engines(Map<Long, Integer> m) {
    StringBuilder b = new StringBuilder();
    m.forEach((k, v) -> b.append(b.isEmpty() ? "" : " ").append(k).append(':').append(v));
    return b.toString();
  }

  private static String ms(double v) {
    return Double.isNaN(v) ? "-" : String.format(Locale.ROOT, "%.0f ms", v);
  }
}
