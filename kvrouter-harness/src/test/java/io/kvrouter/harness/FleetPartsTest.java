package io.kvrouter.harness;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;
import org.junit.jupiter.api.Test;
import org.msgpack.core.MessageBufferPacker;
import org.msgpack.core.MessagePack;

/**
 * The pieces of {@code bench fleet} that need no fleet: percentiles, the imbalance, a request's
 * body, the child engine's banner, the lag of a batch, the Prometheus sums, the end check's
 * comparison, the settings' refusals. A whole fleet, in this JVM and as child processes:
 * kvrouter-cli's FleetBenchTest.
 */
class FleetPartsTest {
  private static final ObjectMapper JSON = new ObjectMapper();

  static FleetBench.Settings settings(
      List<String> policies, int requests, int gateways, String sync) {
    return new FleetBench.Settings(
        null, requests, policies, 2, true, 1024, 64, 2, 4, 5, 50, 20, 64, 64, 8, 0, gateways, sync,
        false, false, null, "");
  }

  @Test
  void percentilesAreNearestRank() {
    double[] v = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    assertThat(Percentiles.pct(v, 50)).isEqualTo(5);
    assertThat(Percentiles.pct(v, 90)).isEqualTo(9);
    assertThat(Percentiles.pct(v, 99)).isEqualTo(10);
    assertThat(Percentiles.pct(new double[] {7}, 1)).isEqualTo(7);
    assertThat(Percentiles.pct(new double[0], 50)).isNaN();
    assertThat(Percentiles.sorted(List.of(3.0, 1.0, 2.0))).containsExactly(1, 2, 3);
  }

  @Test
  void theImbalanceIsTheBusiestEnginesTimeInFlightOverTheMean() {
    // engine 1: 10 + 30 = 40 ns; engine 2: 20; engine 3: nothing; request 4 failed (not counted)
    boolean[] ok = {true, true, true, false};
    long[] worker = {1, 2, 1, 2};
    long[] sent = {0, 0, 100, 0};
    long[] finish = {10, 20, 130, 1000};
    // mean over the 3 engines: 60 / 3 = 20; busiest: 40
    assertThat(FleetLoad.imbalance(3, ok, worker, sent, finish)).isEqualTo(2.0);
    // an answer without a known engine counts nowhere; nothing answered: unknown
    assertThat(FleetLoad.imbalance(2, new boolean[] {true}, new long[] {-1}, sent, finish)).isNaN();
  }

  @Test
  void aRequestIsAStreamedCompletionOfTokenIdsWithUsage() throws Exception {
    String body = FleetLoad.body(new int[] {5, 0, 17}, 4);
    JsonNode b = JSON.readTree(body);
    assertThat(b.path("model").asText()).isEqualTo("trace");
    assertThat(b.path("stream").asBoolean()).isTrue();
    assertThat(b.path("stream_options").path("include_usage").asBoolean()).isTrue();
    assertThat(b.path("ignore_eos").asBoolean()).isTrue();
    assertThat(b.path("max_tokens").asInt()).isEqualTo(4);
    assertThat(b.path("prompt").toString()).isEqualTo("[5,0,17]");
  }

  @Test
  void anAdmissionRequestCarriesItsPriorityInTheBody() throws Exception {
    JsonNode b = JSON.readTree(FleetLoad.body(new int[] {5, 0, 17}, 4, true, -1));
    assertThat(b.path("priority").isInt()).isTrue();
    assertThat(b.path("priority").asInt()).isEqualTo(-1);
    assertThat(b.path("prompt").toString()).isEqualTo("[5,0,17]");
    assertThat(JSON.readTree(FleetLoad.body(new int[] {5}, 4)).has("priority")).isFalse();
  }

  @Test
  void aSamplesBandAndTenantComeFromItsLabels() {
    String line =
        "kvrouter_gateway_queue_rejections_total{band=\"high\",model=\"trace\",reason=\"queue_full\","
            + "tenant=\"t3\"} 2.0";
    assertThat(FleetReads.label(line, "band")).isEqualTo("high");
    assertThat(FleetReads.label(line, "tenant")).isEqualTo("t3");
    assertThat(FleetReads.label(line, "priority")).isEqualTo("?");
  }

  @Test
  void aChildEnginesAddressesComeFromItsBanner() {
    assertThat(
            ChildEngine.addresses(
                "kvrouter mock-engine: model trace on http://127.0.0.1:40123, KV events on"
                    + " tcp://127.0.0.1:40124 (replay tcp://127.0.0.1:40125)"))
        .containsExactly(
            "http://127.0.0.1:40123", "tcp://127.0.0.1:40124", "tcp://127.0.0.1:40125");
    // without KV events, or a log line: not the banner
    assertThat(ChildEngine.addresses("kvrouter mock-engine: model trace on http://127.0.0.1:1"))
        .isNull();
    assertThat(ChildEngine.addresses("WARNING: a restricted method ...")).isNull();
  }

  @Test
  void aBatchsLagIsItsReceiveTimeLessItsPublishTime() throws Exception {
    MessageBufferPacker p = MessagePack.newDefaultBufferPacker();
    p.packArrayHeader(3).packDouble(1_700_000_000.25).packArrayHeader(0).packNil();
    assertThat(LagProbe.lagMs(p.toByteArray(), 1_700_000_000_300.0)).isEqualTo(50.0);
    MessageBufferPacker q = MessagePack.newDefaultBufferPacker();
    q.packString("not a batch");
    assertThat(LagProbe.lagMs(q.toByteArray(), 1)).isNaN();
  }

  @Test
  void aMetricSumAddsTheSamplesOfOnePrefixOnly() {
    String metrics =
        """
        # HELP kvrouter_sync_peer_requests requests in flight of peers
        # TYPE kvrouter_sync_peer_requests gauge
        kvrouter_sync_peer_requests{model="a"} 2.0
        kvrouter_sync_peer_requests{model="b"} 3.0
        kvrouter_sync_peer_requests_total{model="a"} 100.0
        kvrouter_gateway_stale_connection_resends_total 4.0
        """;
    assertThat(FleetReads.metricSum(metrics, "kvrouter_sync_peer_requests{")).isEqualTo(5.0);
    assertThat(FleetReads.metricSum(metrics, "kvrouter_gateway_stale_connection_resends_total"))
        .isEqualTo(4.0);
    assertThat(FleetReads.metricSum(metrics, "kvrouter_absent{")).isZero();
  }

  @Test
  void theEndCheckComparesTheStoredBlocksOfTheDumpPerWorker() throws Exception {
    JsonNode dump =
        JSON.readTree(
            """
            {"indexes": [{"events": [
              {"worker_id": 1, "event": {"data": {"stored": {"blocks": [
                {"block_hash": 11}, {"block_hash": 12}]}}}},
              {"worker_id": 2, "event": {"data": {"removed": {"block_hashes": [21]}}}},
              {"worker_id": 2, "event": {"data": {"stored": {"blocks": [{"block_hash": 22}]}}}}
            ]}]}
            """);
    Map<Long, TreeSet<String>> indexed = EndCheck.storedBlocks(dump);
    assertThat(indexed).containsOnlyKeys(1L, 2L);
    assertThat(indexed.get(1L)).containsExactly("11", "12");
    assertThat(indexed.get(2L)).containsExactly("22");
    assertThat(EndCheck.difference(1, indexed.get(1L), new TreeSet<>(List.of("11", "12"))))
        .isNull();
    assertThat(EndCheck.difference(2, indexed.get(2L), new TreeSet<>(List.of("21", "23"))))
        .isEqualTo("engine 2: router holds 1 blocks, engine 2 (2 missing, 1 extra)");
  }

  @Test
  void policiesAreKnownByName() {
    assertThat(FleetBench.selector("kv", 0)).isNull();
    assertThat(FleetBench.selector(" round-robin ", 0)).isNotNull();
    assertThatThrownBy(() -> FleetBench.selector("fastest", 0))
        .hasMessage(
            "unknown policy 'fastest'; known policies: kv, round-robin, random, least-loaded,"
                + " approx");
  }

  private static String refused(FleetBench.Settings s) throws Exception {
    StringWriter out = new StringWriter();
    StringWriter err = new StringWriter();
    int code = new FleetBench(s, null).run(new PrintWriter(out, true), new PrintWriter(err, true));
    assertThat(code).as(err.toString()).isEqualTo(2);
    assertThat(out.toString()).isEmpty();
    assertThat(FleetBench.processesLeft()).isZero();
    return err.toString().strip();
  }

  @Test
  void badSettingsAreRefusedBeforeAnythingStarts() throws Exception {
    assertThat(refused(settings(List.of("kv"), 0, 1, "on")))
        .isEqualTo("kvrouter bench fleet: --requests must be >= 1");
    assertThat(refused(settings(List.of("kv"), 10, 0, "on")))
        .isEqualTo("kvrouter bench fleet: --gateways must be >= 1");
    assertThat(refused(settings(List.of("kv"), 10, 2, "maybe")))
        .isEqualTo("kvrouter bench fleet: --sync must be on or off");
    assertThat(refused(settings(List.of("kv", "fastest"), 10, 1, "on")))
        .startsWith("kvrouter bench fleet: unknown policy 'fastest'");
  }
}
