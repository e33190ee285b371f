package io.kvrouter.transport.kvevents;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;

/**
 * Golden payloads of a hybrid model's KV events ({@code vectors/kv-events-hybrid.json}, written by
 * hand from the msgpack spec and vLLM's field order, docs/ingestion.md "Hybrid models: KV cache
 * groups"), in both encodings the decoder takes: every field, the group ones included, decodes to
 * its expected value. And the payloads of {@code vectors/kv-events.json}, which carry no group
 * fields, still decode with none.
 */
class HybridEventVectorsTest {
  @SuppressWarnings("unchecked")
  private static final Map<String, Object> HYBRID =
      (Map<String, Object>) MiniJson.read("/vectors/kv-events-hybrid.json");

  @SuppressWarnings("unchecked")
  private static final Map<String, Object> PLAIN =
      (Map<String, Object>) MiniJson.read("/vectors/kv-events.json");

  @SuppressWarnings("unchecked")
  private static List<Map<String, Object>> cases(Map<String, Object> file) {
    return (List<Map<String, Object>>) file.get("decode");
  }

  @Test
  void everyEncodingIsCovered() {
    List<String> names = new ArrayList<>();
    for (Map<String, Object> c : cases(HYBRID)) names.add((String) c.get("name"));
    assertThat(names)
        .containsExactly(
            "positional_events_with_groups",
            "positional_group_idx_without_kind",
            "map_events_with_groups",
            "map_batch_with_groups");
  }

  @TestFactory
  Stream<DynamicTest> hybridPayloadsDecodeWithTheirGroups() {
    List<DynamicTest> tests = new ArrayList<>();
    for (Map<String, Object> c : cases(HYBRID)) {
      tests.add(
          DynamicTest.dynamicTest(
              (String) c.get("name"), () -> check(KvEventDecoder.decode(payload(c)), expected(c))));
    }
    return tests.stream();
  }

  @TestFactory
  Stream<DynamicTest> payloadsWithoutGroupsDecodeWithout() {
    List<DynamicTest> tests = new ArrayList<>();
    for (Map<String, Object> c : cases(PLAIN)) {
      tests.add(
          DynamicTest.dynamicTest(
              (String) c.get("name"),
              () -> {
                for (EngineEvent e : KvEventDecoder.decode(payload(c)).events()) {
                  if (e instanceof EngineEvent.BlockStored s) {
                    assertThat(s.groupIdx()).as("group_idx of %s", s).isNull();
                    assertThat(s.kvCacheSpecKind()).as("kind of %s", s).isNull();
                    assertThat(s.kvCacheSpecSlidingWindow()).as("window of %s", s).isNull();
                  } else if (e instanceof EngineEvent.BlockRemoved r) {
                    assertThat(r.groupIdx()).as("group_idx of %s", r).isNull();
                  }
                }
              }));
    }
    return tests.stream();
  }

  private static byte[] payload(Map<String, Object> c) {
    return HexFormat.of().parseHex((String) c.get("payload_hex"));
  }

  @SuppressWarnings("unchecked")
  private static Map<String, Object> expected(Map<String, Object> c) {
    return (Map<String, Object>) c.get("expected");
  }

  @SuppressWarnings("unchecked")
  private static void check(KvEventBatch b, Map<String, Object> exp) {
    assertThat(b.ts()).as("ts").isEqualTo(((Number) exp.get("ts")).doubleValue());
    assertThat(b.dpRank()).as("dp_rank").isEqualTo(intOrNull(exp.get("dp_rank")));
    List<Map<String, Object>> events = (List<Map<String, Object>>) exp.get("events");
    assertThat(b.events()).as("events").hasSize(events.size());
    for (int i = 0; i < events.size(); i++) {
      String where = "events[" + i + "]";
      EngineEvent got = b.events().get(i);
      Map<String, Object> e = events.get(i);
      switch ((String) e.get("type")) {
        case "BlockStored" -> {
          assertThat(got).as(where).isInstanceOf(EngineEvent.BlockStored.class);
          EngineEvent.BlockStored s = (EngineEvent.BlockStored) got;
          assertThat(s.blockHashes()).as(where + ".block_hashes").containsExactly(u64s(e));
          Object parent = e.get("parent_block_hash");
          assertThat(s.hasParent()).as(where + ".parent present").isEqualTo(parent != null);
          if (parent != null) {
            assertThat(s.parentBlockHash())
                .as(where + ".parent_block_hash")
                .isEqualTo(Long.parseUnsignedLong((String) parent));
          }
          List<Object> tokens = (List<Object>) e.get("token_ids");
          int[] t = new int[tokens.size()];
          for (int k = 0; k < t.length; k++) t[k] = ((Number) tokens.get(k)).intValue();
          assertThat(s.tokenIds()).as(where + ".token_ids").containsExactly(t);
          assertThat(s.blockSize())
              .as(where + ".block_size")
              .isEqualTo(intOrNull(e.get("block_size")));
          assertThat(s.medium()).as(where + ".medium").isEqualTo(e.get("medium"));
          assertThat(s.groupIdx())
              .as(where + ".group_idx")
              .isEqualTo(intOrNull(e.get("group_idx")));
          assertThat(s.kvCacheSpecKind())
              .as(where + ".kv_cache_spec_kind")
              .isEqualTo(e.get("kv_cache_spec_kind"));
          assertThat(s.kvCacheSpecSlidingWindow())
              .as(where + ".kv_cache_spec_sliding_window")
              .isEqualTo(intOrNull(e.get("kv_cache_spec_sliding_window")));
        }
        case "BlockRemoved" -> {
          assertThat(got).as(where).isInstanceOf(EngineEvent.BlockRemoved.class);
          EngineEvent.BlockRemoved r = (EngineEvent.BlockRemoved) got;
          assertThat(r.blockHashes()).as(where + ".block_hashes").containsExactly(u64s(e));
          assertThat(r.medium()).as(where + ".medium").isEqualTo(e.get("medium"));
          assertThat(r.groupIdx())
              .as(where + ".group_idx")
              .isEqualTo(intOrNull(e.get("group_idx")));
          assertThat(r.kvCacheSpecKind())
              .as(where + ".kv_cache_spec_kind")
              .isEqualTo(e.get("kv_cache_spec_kind"));
        }
        case "AllBlocksCleared" ->
            assertThat(got).as(where).isInstanceOf(EngineEvent.AllBlocksCleared.class);
        default -> throw new AssertionError(where + ": unknown type " + e.get("type"));
      }
    }
  }

  private static Integer intOrNull(Object o) {
    return o == null ? null : ((Number) o).intValue();
  }

  @SuppressWarnings("unchecked")
  private static long[] u64s(Map<String, Object> e) {
    List<Object> l = (List<Object>) e.get("block_hashes");
    long[] out = new long[l.size()];
    for (int i = 0; i < out.length; i++) out[i] = Long.parseUnsignedLong((String) l.get(i));
    return out;
  }
}
