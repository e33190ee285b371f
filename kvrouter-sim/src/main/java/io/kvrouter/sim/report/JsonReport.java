package io.kvrouter.sim.report;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonGenerator;
import io.kvrouter.route.RoutingSettings;
import io.kvrouter.route.TierWeights;
import io.kvrouter.sim.Policy;
import io.kvrouter.sim.PolicyResult;
import io.kvrouter.sim.PooledCeiling;
import io.kvrouter.sim.SimConfig;
import io.kvrouter.sim.SimulationResult;
import io.kvrouter.sim.Verification;
import java.io.IOException;
import java.io.StringWriter;
import java.io.UncheckedIOException;

/** The results of a {@code simulate} run as one JSON document (for scripts; {@code --json}). */
public final class JsonReport {
  private JsonReport() {}

  public static String write(SimulationResult s) {
    StringWriter w = new StringWriter();
    try (JsonGenerator g = new JsonFactory().createGenerator(w)) {
      g.useDefaultPrettyPrinter();
      g.writeStartObject();
      g.writeStringField("trace", s.trace());
      g.writeNumberField("requests", s.requests());
      g.writeNumberField("trace_span_s", s.traceSpanSec());
      g.writeObjectFieldStart("config");
      config(g, s.config());
      g.writeEndObject();
      PooledCeiling p = s.pooled();
      g.writeObjectFieldStart("pooled");
      g.writeNumberField("capacity_blocks", p.capacityBlocks());
      g.writeNumberField("hit_rate", p.hitRate());
      g.writeNumberField("prompt_tokens", p.promptTokens());
      g.writeNumberField("cached_tokens", p.cachedTokens());
      g.writeNumberField("rejected", p.rejected());
      g.writeEndObject();
      g.writeArrayFieldStart("policies");
      for (PolicyResult r : s.policies()) policy(g, r);
      g.writeEndArray();
      PolicyResult kv = s.of(Policy.KV);
      PolicyResult rr = s.of(Policy.ROUND_ROBIN);
      if (kv != null && p.hitRate() > 0) {
        g.writeNumberField("kv_hit_rate_over_pooled", kv.hitRate() / p.hitRate());
      }
      if (kv != null && rr != null) {
        g.writeNumberField(
            "round_robin_p90_ttft_over_kv", rr.ttftPercentile(90) / kv.ttftPercentile(90));
      }
      g.writeBooleanField("verified", s.verified());
      g.writeNumberField("wall_s", s.wallNanos() / 1e9);
      g.writeEndObject();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return w.toString();
  }

  /**
   * Every setting the run used, defaults included, so a script can tell what it ran (the names are
   * the flags' without their dashes).
   */
  private static void config(JsonGenerator g, SimConfig c) throws IOException {
    g.writeNumberField("workers", c.workers());
    g.writeNumberField("dp_size", c.dpSize());
    g.writeNumberField("gpu_blocks", c.gpuBlocks());
    g.writeNumberField("block_size", c.blockSize());
    g.writeNumberField("speedup", c.speedup());
    g.writeNumberField("prefill_base_ms", c.timing().prefillBaseMs());
    g.writeNumberField("prefill_ms_per_1k_tokens", c.timing().prefillMsPer1kTokens());
    g.writeNumberField("decode_ms_per_token", c.timing().decodeMsPerToken());
    g.writeNumberField("max_batch", c.timing().maxBatch());
    g.writeNumberField("event_delay_ms", c.eventDelayMs());
    g.writeBooleanField("events_as_json", c.jsonEvents());
    g.writeStringField("removed_events", c.removedEvents().cliName());
    g.writeNumberField("host_blocks", c.hostBlocks());
    g.writeNumberField("host_ms_per_block", c.hostMsPerBlock());
    g.writeBooleanField("approx_correction", c.approxCorrection());
    g.writeNumberField("approx_kv_blocks", c.approxKvBlocks());
    g.writeNumberField("verify_prompts", c.verifyPrompts());
    g.writeNumberField("load_samples", c.loadSamples());
    g.writeNumberField("seed", c.seed());
    RoutingSettings r = c.routing();
    g.writeNumberField("overlap_weight", r.overlapWeight());
    g.writeNumberField("pressure_weight", r.pressureWeight());
    g.writeNumberField("temperature", r.temperature());
    g.writeNumberField("router_seed", r.seed());
    g.writeNumberField("busy_prefill_tokens", r.busyPrefillTokens());
    g.writeNumberField("busy_block_fraction", r.busyBlockFraction());
    g.writeNumberField("request_expiry_seconds", r.requestExpiry().toMillis() / 1000.0);
    g.writeNumberField("max_blocks", r.maxBlocks());
    g.writeNumberField("max_tier_blocks", r.maxTierBlocks());
    TierWeights w = r.tierWeights();
    g.writeNumberField("host_tier_weight", w.host());
    g.writeNumberField("disk_tier_weight", w.disk());
    g.writeNumberField("external_tier_weight", w.external());
    if (c.hybrid()) g.writeStringField("kv_groups", c.kvGroups().toString());
  }

  private static void policy(JsonGenerator g, PolicyResult r) throws IOException {
    g.writeStartObject();
    g.writeStringField("policy", r.policy().cliName());
    g.writeNumberField("requests", r.requests());
    g.writeNumberField("completed", r.completed());
    g.writeNumberField("rejected", r.rejected());
    g.writeNumberField("hit_rate", r.hitRate());
    g.writeNumberField("router_expected_hit_rate", r.routedHitRate());
    g.writeNumberField("prompt_tokens", r.promptTokens());
    g.writeNumberField("cached_tokens", r.cachedTokens());
    g.writeObjectFieldStart("ttft_ms");
    for (int q : new int[] {50, 90, 99}) finite(g, "p" + q, r.ttftPercentile(q));
    finite(g, "max", r.ttftMs().length == 0 ? Double.NaN : r.ttftMs()[r.ttftMs().length - 1]);
    g.writeEndObject();
    g.writeNumberField("makespan_s", r.makespanSec());
    g.writeNumberField("requests_per_s", r.requestsPerSec());
    g.writeNumberField("output_tokens_per_s", r.outputTokensPerSec());
    g.writeNumberField("load_imbalance", r.imbalance());
    g.writeFieldName("mean_load");
    g.writeArray(r.meanLoad(), 0, r.meanLoad().length);
    g.writeFieldName("prefill_utilisation");
    g.writeArray(r.prefillUtilisation(), 0, r.prefillUtilisation().length);
    PolicyResult.Prediction pr = r.prediction();
    if (pr != null) {
      g.writeObjectFieldStart("prediction");
      g.writeNumberField("routed_error_tokens", pr.routedErrorTokens());
      g.writeNumberField("routed_error", share(pr.routedErrorTokens(), r.promptTokens()));
      g.writeNumberField("admission_predicted_tokens", pr.admissionPredictedTokens());
      g.writeNumberField(
          "admission_predicted_hit_rate", share(pr.admissionPredictedTokens(), r.promptTokens()));
      g.writeNumberField("admission_error_tokens", pr.admissionErrorTokens());
      g.writeNumberField("admission_error", share(pr.admissionErrorTokens(), r.promptTokens()));
      g.writeEndObject();
    }
    g.writeNumberField("events_published", r.eventsPublished());
    g.writeNumberField("events_applied", r.eventsApplied());
    Verification v = r.verification();
    g.writeObjectFieldStart("verification");
    g.writeBooleanField("ok", v.ok());
    g.writeNumberField("ranks", v.ranks());
    g.writeNumberField("blocks", v.blocks());
    g.writeNumberField("prompts", v.prompts());
    g.writeArrayFieldStart("problems");
    for (String problem : v.problems()) g.writeString(problem);
    g.writeEndArray();
    g.writeEndObject();
    g.writeNumberField("wall_s", r.wallNanos() / 1e9);
    g.writeEndObject();
  }

  private static double share(long part, long whole) {
    return whole == 0 ? 0 : (double) part / whole;
  }

  private static void finite(JsonGenerator g, String name, double v) throws IOException {
    if (Double.isFinite(v)) {
      g.writeNumberField(name, v);
    } else {
      g.writeNullField(name);
    }
  }
}
