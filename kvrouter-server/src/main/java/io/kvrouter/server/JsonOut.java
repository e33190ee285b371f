package io.kvrouter.server;

import com.fasterxml.jackson.core.JsonEncoding;
import com.fasterxml.jackson.core.JsonGenerator;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import io.kvrouter.index.OverlapScores;
import io.kvrouter.index.Tier;
import io.kvrouter.index.TieredIndex;
import io.kvrouter.index.TieredScores;
import io.kvrouter.route.Candidate;
import io.kvrouter.route.CandidateCost;
import io.kvrouter.route.EngineRole;
import io.kvrouter.route.KvSource;
import io.kvrouter.route.RouteDecision;
import io.kvrouter.route.TierOverlap;
import io.kvrouter.transport.json.RouterEventJson;
import io.kvrouter.transport.kvevents.ClearScope;
import io.kvrouter.transport.kvevents.StorageTier;
import io.kvrouter.transport.zmq.IngestStats;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.List;
import java.util.Locale;

/**
 * Every JSON answer of the service (docs/service.md gives their shapes), written as compact UTF-8
 * with Jackson's generator and ended by a newline.
 *
 * <pre>
 * Implementation notes
 *
 * Stateless. Each answer is one static method: most return the document's bytes (built in
 * memory, then sent with a Content-Length); dump() streams to the response, since an index's
 * dump can be large. Every document ends with "\n", so that answers printed one after another
 * (curl in a shell) stay on lines of their own; JSON parsers skip the trailing whitespace. u64
 * values (instance ids, hashes) are written unsigned, as JSON numbers. A registration is written
 * the same way in /register, /workers and /dump (registrationFields), so a dumped registration
 * is a valid /register body.
 * </pre>
 */
final class JsonOut {
  private JsonOut() {}

  /** Writes one document. */
  @FunctionalInterface
  private interface Body {
    void write(JsonGenerator g) throws IOException;
  }

  /** The document {@code body} writes, as UTF-8 bytes, and the final newline. */
  private static byte[] bytes(Body body) {
    ByteArrayOutputStream out = new ByteArrayOutputStream(256);
    try (JsonGenerator g = JsonBody.FACTORY.createGenerator(out, JsonEncoding.UTF8)) {
      body.write(g);
      g.writeRaw('\n');
    } catch (IOException e) {
      throw new UncheckedIOException(e); // in memory: does not happen
    }
    return out.toByteArray();
  }

  // ------------------------------------------------------------------ registrations

  /** The answer of {@code POST /register}: the registration with its ingestion status. */
  static byte[] registration(ModelIndex m, Registration r) {
    return bytes(
        g -> {
          g.writeStartObject();
          registrationFields(g, m, r);
          g.writeEndObject();
        });
  }

  /**
   * A rank's KV events and capacity fields, in this order: endpoint, replay_endpoint, topic,
   * engine_block_size, all_blocks_cleared (each when it applies) and capacity_blocks.
   */
  private static void engineFields(JsonGenerator g, Registration r) throws IOException {
    stringOrNull(g, "endpoint", r.endpoint());
    stringOrNull(g, "replay_endpoint", r.replayEndpoint());
    if (r.topic() != null) g.writeStringField("topic", r.topic());
    if (r.endpoint() != null) g.writeNumberField("engine_block_size", r.engineBlockSize());
    if (r.clearScope() != ClearScope.DEVICE) {
      g.writeStringField("all_blocks_cleared", r.clearScope().wireName());
    }
    g.writeNumberField("capacity_blocks", r.capacityBlocks());
  }

  private static void registrationFields(JsonGenerator g, ModelIndex m, Registration r)
      throws IOException {
    u64Field(g, "instance_id", r.worker().workerId());
    g.writeNumberField("dp_rank", r.worker().dpRank());
    g.writeStringField("model_name", m.key.modelName());
    g.writeStringField("routing_group", m.key.routingGroup());
    g.writeNumberField("block_size", m.blockSize);
    engineFields(g, r);
    if (r.baseUrl() != null) g.writeStringField("base_url", r.baseUrl());
    if (r.role() != EngineRole.BOTH) g.writeStringField("role", r.role().wireName());
    g.writeStringField("ingestion", ingestion(m, r));
    g.writeStringField("kv_source", r.kvSource().wireName());
  }

  private static String ingestion(ModelIndex m, Registration r) {
    return m.nats != null && r.kvSource() == KvSource.EVENTS ? "nats" : r.ingestion();
  }

  /** The answer of {@code POST /unregister}: {@code {"removed": [{instance, rank, key}...]}}. */
  static byte[] removed(List<Registry.Removed> removed) {
    return bytes(
        g -> {
          g.writeStartObject();
          g.writeArrayFieldStart("removed");
          for (Registry.Removed r : removed) {
            g.writeStartObject();
            u64Field(g, "instance_id", r.worker().workerId());
            g.writeNumberField("dp_rank", r.worker().dpRank());
            g.writeStringField("model_name", r.key().modelName());
            g.writeStringField("routing_group", r.key().routingGroup());
            g.writeEndObject();
          }
          g.writeEndArray();
          g.writeEndObject();
        });
  }

  /**
   * The answer of {@code GET /workers}: one entry per instance and index, in index then worker
   * order, with its ranks.
   */
  static byte[] workers(List<ModelIndex> indexes) {
    return bytes(
        g -> {
          g.writeStartArray();
          for (ModelIndex m : indexes) {
            List<Registration> regs = new ArrayList<>(m.registrations.values());
            for (int i = 0; i < regs.size(); ) {
              long id = regs.get(i).worker().workerId();
              int j = i;
              while (j < regs.size() && regs.get(j).worker().workerId() == id) j++;
              instance(g, m, id, regs.subList(i, j));
              i = j;
            }
          }
          g.writeEndArray();
        });
  }

  private static void instance(JsonGenerator g, ModelIndex m, long id, List<Registration> ranks)
      throws IOException {
    g.writeStartObject();
    u64Field(g, "instance_id", id);
    g.writeStringField("model_name", m.key.modelName());
    g.writeStringField("routing_group", m.key.routingGroup());
    g.writeNumberField("block_size", m.blockSize);
    g.writeObjectFieldStart("endpoints");
    for (Registration r : ranks) {
      if (r.endpoint() != null) {
        g.writeStringField(Integer.toString(r.worker().dpRank()), r.endpoint());
      }
    }
    g.writeEndObject();
    g.writeArrayFieldStart("ranks");
    for (Registration r : ranks) {
      g.writeStartObject();
      g.writeNumberField("dp_rank", r.worker().dpRank());
      engineFields(g, r);
      g.writeNumberField("indexed_blocks", m.router.index().blockCount(r.worker()));
      if (r.baseUrl() != null) g.writeStringField("base_url", r.baseUrl());
      if (r.role() != EngineRole.BOTH) g.writeStringField("role", r.role().wireName());
      g.writeStringField("ingestion", ingestion(m, r));
      g.writeStringField("kv_source", r.kvSource().wireName());
      g.writeNumberField("kv_capacity_blocks", Math.max(0, m.router.kvBlocks(r.worker())));
      if (r.listener() != null) zmq(g, r.listener());
      PredictionAccuracy acc = m.accuracyOrNull(r.worker());
      if (acc != null) acc.write(g);
      g.writeEndObject();
    }
    g.writeEndArray();
    g.writeEndObject();
  }

  /** The state and counters of a rank's ZMQ listener, for /workers. */
  private static void zmq(JsonGenerator g, ZmqListener l) throws IOException {
    IngestStats s = l.stats();
    g.writeObjectFieldStart("zmq");
    g.writeStringField("state", l.state());
    g.writeBooleanField("connected_once", l.connectedOnce());
    g.writeNumberField("last_sequence", l.lastSequence());
    g.writeNumberField("messages", s.messages());
    g.writeNumberField("batches", s.batches());
    g.writeNumberField("events_applied", l.applied());
    g.writeNumberField("decode_errors", s.decodeErrors());
    g.writeNumberField("bad_frames", s.badFrames());
    g.writeNumberField("duplicates", s.duplicates());
    g.writeNumberField("gaps", s.gaps());
    g.writeNumberField("lost_messages", s.lostMessages());
    g.writeNumberField("replays", s.replays());
    g.writeNumberField("replay_failures", s.replayFailures());
    g.writeNumberField("restarts", s.restarts());
    g.writeNumberField("connections", s.connections());
    g.writeNumberField("reconnects", s.reconnects());
    g.writeNumberField("disconnects", s.disconnects());
    g.writeNumberField("dropped_foreign_rank", l.droppedForeignRank());
    g.writeNumberField("dropped_unregistered", l.droppedUnregistered());
    g.writeNumberField("tail_probes", s.tailProbes());
    g.writeNumberField("tail_recovered", s.tailRecovered());
    if (s.lagBatches() == 0) {
      g.writeNullField("mean_event_lag_ms");
    } else {
      g.writeNumberField(
          "mean_event_lag_ms", Math.round((double) s.lagMicros() / s.lagBatches()) / 1000.0);
    }
    double silent = l.secondsSinceLastMessage();
    if (silent < 0) {
      g.writeNullField("seconds_since_last_message");
    } else {
      g.writeNumberField("seconds_since_last_message", Math.round(silent * 1000) / 1000.0);
    }
    g.writeEndObject();
  }

  // ------------------------------------------------------------------ queries and routing

  /**
   * The answer of {@code /query} and {@code /query_by_hash}: {@code {"scores": {"<instance>":
   * {"<dp_rank>": tokens}}, "blocks": {...}, "tree_sizes": {...}, "block_size": n}}, matched tokens
   * (blocks × block size, as Dynamo reports them), matched blocks and blocks held, for every worker
   * rank with at least one matched block, in worker order.
   */
  static byte[] scores(OverlapScores s, int blockSize) {
    return scores(s, null, blockSize);
  }

  /**
   * {@link #scores(OverlapScores, int)}, plus, when {@code tiers} is not null (an engine published
   * offloaded copies), {@code "tier_blocks": {"<instance>": {"<dp_rank>": {"device": n, "host": n,
   * "disk": n, "external": n}}}}: the device prefix, then how many more leading blocks each slower
   * tier adds, for every rank with a block on some tier (docs/routing.md, "Blocks beyond the GPU").
   */
  static byte[] scores(OverlapScores s, TieredScores tiers, int blockSize) {
    final int n = s.size();
    Worker[] workers = new Worker[n];
    int[] score = new int[n];
    int[] held = new int[n];
    Integer[] order = new Integer[n];
    for (int i = 0; i < n; i++) {
      workers[i] = s.worker(i);
      score[i] = s.scoreAt(i);
      held[i] = s.blockCountAt(i);
      order[i] = i;
    }
    Arrays.sort(order, (a, b) -> workers[a].compareTo(workers[b]));
    return bytes(
        g -> {
          g.writeStartObject();
          nested(g, "scores", workers, order, score, blockSize);
          nested(g, "blocks", workers, order, score, 1);
          nested(g, "tree_sizes", workers, order, held, 1);
          if (tiers != null) tierBlocks(g, tiers);
          g.writeNumberField("block_size", blockSize);
          g.writeEndObject();
        });
  }

  private static void nested(
      JsonGenerator g, String name, Worker[] workers, Integer[] order, int[] values, int factor)
      throws IOException {
    g.writeObjectFieldStart(name);
    long open = 0;
    boolean any = false;
    for (Integer i : order) {
      Worker w = workers[i];
      if (!any || w.workerId() != open) {
        if (any) g.writeEndObject();
        g.writeObjectFieldStart(Long.toUnsignedString(w.workerId()));
        open = w.workerId();
        any = true;
      }
      g.writeNumberField(Integer.toString(w.dpRank()), (long) values[i] * factor);
    }
    if (any) g.writeEndObject();
    g.writeEndObject();
  }

  private static void tierBlocks(JsonGenerator g, TieredScores t) throws IOException {
    final int n = t.size();
    Integer[] order = new Integer[n];
    for (int i = 0; i < n; i++) order[i] = i;
    Arrays.sort(order, (a, b) -> t.worker(a).compareTo(t.worker(b)));
    g.writeObjectFieldStart("tier_blocks");
    long open = 0;
    boolean any = false;
    for (Integer i : order) {
      Worker w = t.worker(i);
      if (!any || w.workerId() != open) {
        if (any) g.writeEndObject();
        g.writeObjectFieldStart(Long.toUnsignedString(w.workerId()));
        open = w.workerId();
        any = true;
      }
      g.writeObjectFieldStart(Integer.toString(w.dpRank()));
      int below = 0;
      for (Tier tier : Tier.values()) {
        int p = t.blocks(i, tier);
        g.writeNumberField(tier.name().toLowerCase(Locale.ROOT), p - below);
        below = p;
      }
      g.writeEndObject();
    }
    if (any) g.writeEndObject();
    g.writeEndObject();
  }

  private static void tierOverlap(JsonGenerator g, TierOverlap t) throws IOException {
    if (t == null) return;
    g.writeObjectFieldStart("tier_blocks");
    g.writeNumberField("device", t.device());
    g.writeNumberField("host", t.host());
    g.writeNumberField("disk", t.disk());
    g.writeNumberField("external", t.external());
    g.writeEndObject();
    g.writeNumberField("weighted_blocks", t.weightedBlocks());
  }

  /**
   * The 200 answer of {@code /route}: the chosen rank, its cost, every candidate, the busy; with
   * tiers, each with its {@code tier_blocks} and {@code weighted_blocks}.
   */
  static byte[] routed(String requestId, RouteDecision.Routed r) {
    return bytes(
        g -> {
          g.writeStartObject();
          g.writeStringField("request_id", requestId);
          u64Field(g, "instance_id", r.worker().workerId());
          g.writeNumberField("dp_rank", r.worker().dpRank());
          g.writeNumberField("overlap_blocks", r.overlapBlocks());
          g.writeNumberField("overlap_tokens", r.overlapTokens());
          g.writeNumberField("cost", r.cost());
          tierOverlap(g, r.tierOverlap());
          g.writeArrayFieldStart("candidates");
          List<String> terms = r.scorerNames();
          for (int i = 0, n = r.candidates().size(); i < n; i++) {
            CandidateCost c = r.candidates().get(i);
            candidateFields(g, c.candidate(), c.cost(), r.tierOverlapOf(c.worker()));
            if (!terms.isEmpty()) {
              // each named term's share of the cost (docs/routing.md, "Scorers")
              g.writeObjectFieldStart("scores");
              for (int j = 0; j < terms.size(); j++) {
                g.writeNumberField(terms.get(j), r.contribution(i, j));
              }
              g.writeEndObject();
            }
            g.writeEndObject();
          }
          g.writeEndArray();
          g.writeArrayFieldStart("busy");
          for (Worker w : r.busy()) {
            g.writeStartObject();
            u64Field(g, "instance_id", w.workerId());
            g.writeNumberField("dp_rank", w.dpRank());
            g.writeEndObject();
          }
          g.writeEndArray();
          g.writeEndObject();
        });
  }

  /** The 503 answer of {@code /route} when every allowed rank is busy: the error and the loads. */
  static byte[] allBusy(ModelKey key, RouteDecision.AllBusy b) {
    return bytes(
        g -> {
          g.writeStartObject();
          g.writeStringField(
              "error", "every allowed worker of " + key.describe() + " is busy; nothing recorded");
          g.writeArrayFieldStart("candidates");
          for (Candidate c : b.candidates()) candidate(g, c, Double.NaN, null);
          g.writeEndArray();
          g.writeEndObject();
        });
  }

  private static void candidate(JsonGenerator g, Candidate c, double cost, TierOverlap tiers)
      throws IOException {
    candidateFields(g, c, cost, tiers);
    g.writeEndObject();
  }

  /** A candidate's object, left open for more fields. */
  private static void candidateFields(JsonGenerator g, Candidate c, double cost, TierOverlap tiers)
      throws IOException {
    g.writeStartObject();
    u64Field(g, "instance_id", c.worker().workerId());
    g.writeNumberField("dp_rank", c.worker().dpRank());
    g.writeNumberField("overlap_blocks", c.overlapBlocks());
    g.writeNumberField("cached_blocks", c.cachedBlocks());
    g.writeNumberField("prefill_blocks", c.prefillBlocks());
    g.writeNumberField("decode_blocks", c.decodeBlocks());
    if (!Double.isNaN(cost)) g.writeNumberField("cost", cost);
    tierOverlap(g, tiers);
  }

  /** The answer of {@code /requests/{id}/...}: {@code {"request_id": id, "state": state}}. */
  static byte[] requestState(String requestId, String state) {
    return bytes(
        g -> {
          g.writeStartObject();
          g.writeStringField("request_id", requestId);
          g.writeStringField("state", state);
          g.writeEndObject();
        });
  }

  // ------------------------------------------------------------------ events, dump, operations

  /** The answer of {@code POST /events}: {@code {"applied": n}}. */
  static byte[] applied(int n) {
    return bytes(
        g -> {
          g.writeStartObject();
          g.writeNumberField("applied", n);
          g.writeEndObject();
        });
  }

  /**
   * Streams {@code GET /dump}: {@code {"indexes": [{model_name, routing_group, block_size, workers:
   * [registration...], events: [RouterEvent...]}]}}. Each worker entry also carries its {@code
   * capacity_blocks} as {@code kv_blocks}, the field's former name, which the warm start of a peer
   * reads (PeerWarmStart; so do the servers of earlier versions).
   *
   * <p>An index with tiers (an engine published copies beyond the device) also has {@code "tiers"}
   * (Dynamo's names of the tiers it has cumulative indexes for, {@code ["device", "host_pinned",
   * ...]}) and {@code "tiered_events"}: its dump on every tier (TieredIndex.dumpTiered), one stored
   * event per block and tier, each beyond the device with Dynamo's {@code storage_tier}. {@code
   * events} then holds the device events of that same list, for readers of earlier versions, which
   * know nothing of tiers; this version's warm start reads {@code tiered_events} when present.
   */
  static void dump(OutputStream out, Collection<ModelIndex> indexes) throws IOException {
    try (JsonGenerator g = JsonBody.FACTORY.createGenerator(out, JsonEncoding.UTF8)) {
      g.writeStartObject();
      g.writeArrayFieldStart("indexes");
      for (ModelIndex m : indexes) {
        List<Registration> regs = new ArrayList<>(m.registrations.values());
        TieredIndex tiers = m.tiers();
        Tier slowest = null;
        List<TieredIndex.Entry> tiered = null;
        List<RouterEvent> events;
        if (tiers == null) {
          events = m.router.index().dump();
        } else {
          slowest = tiers.slowestTier(); // before the dump: tiers are only ever added
          tiered = tiers.dumpTiered();
          events = new ArrayList<>();
          for (TieredIndex.Entry e : tiered) {
            if (e.tier() == Tier.DEVICE) events.add(e.event());
          }
        }
        g.writeStartObject();
        g.writeStringField("model_name", m.key.modelName());
        g.writeStringField("routing_group", m.key.routingGroup());
        g.writeNumberField("block_size", m.blockSize);
        g.writeArrayFieldStart("workers");
        for (Registration r : regs) {
          g.writeStartObject();
          registrationFields(g, m, r);
          g.writeNumberField("kv_blocks", r.capacityBlocks());
          g.writeEndObject();
        }
        g.writeEndArray();
        g.writeArrayFieldStart("events");
        for (RouterEvent e : events) g.writeRawValue(RouterEventJson.writeEvent(e));
        g.writeEndArray();
        if (tiered != null) {
          g.writeArrayFieldStart("tiers");
          for (int t = 0; t <= slowest.ordinal(); t++) {
            g.writeString(RouterEventJson.storageTierName(storageTier(Tier.of(t))));
          }
          g.writeEndArray();
          g.writeArrayFieldStart("tiered_events");
          for (TieredIndex.Entry e : tiered) {
            g.writeRawValue(RouterEventJson.writeEvent(storageTier(e.tier()), e.event()));
          }
          g.writeEndArray();
        }
        g.writeEndObject();
      }
      g.writeEndArray();
      g.writeEndObject();
      g.writeRaw('\n');
    }
  }

  /** The transport's name of a core tier (the two enums mirror each other). */
  private static StorageTier storageTier(Tier t) {
    return StorageTier.valueOf(t.name());
  }

  /** The answer of {@code GET /health}. */
  static byte[] health() {
    return bytes(
        g -> {
          g.writeStartObject();
          g.writeStringField("status", "ok");
          g.writeEndObject();
        });
  }

  /** The answer of {@code GET /ready}: readiness, listener counts and, when not ready, why. */
  static byte[] ready(Readiness r, int indexes) {
    return bytes(
        g -> {
          g.writeStartObject();
          g.writeBooleanField("ready", r.ready());
          g.writeNumberField("indexes", indexes);
          g.writeNumberField("listeners", r.listeners());
          g.writeNumberField("listeners_connecting", r.connecting());
          g.writeNumberField("listeners_given_up", r.givenUp());
          if (!r.ready()) g.writeStringField("reason", r.reason());
          g.writeEndObject();
        });
  }

  // ------------------------------------------------------------------ values

  /** Writes an unsigned 64-bit value as a JSON number. */
  private static void u64(JsonGenerator g, long v) throws IOException {
    if (v >= 0) {
      g.writeNumber(v);
    } else {
      g.writeNumber(Long.toUnsignedString(v));
    }
  }

  /** Writes a field holding an unsigned 64-bit value. */
  private static void u64Field(JsonGenerator g, String name, long v) throws IOException {
    g.writeFieldName(name);
    u64(g, v);
  }

  /** Writes a field holding a string or null. */
  private static void stringOrNull(JsonGenerator g, String name, String v) throws IOException {
    if (v == null) {
      g.writeNullField(name);
    } else {
      g.writeStringField(name, v);
    }
  }
}
