package io.kvrouter.transport.kvevents;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowableOfType;

import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.stream.Stream;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;

/**
 * Every case of {@code vectors/kv-events.json} (a copy of the shared file): each "decode" payload
 * decodes to its "expected" batch field by field, each "malformed" one is rejected with a message
 * that names the field and the problem.
 */
class KvEventVectorsTest {
  @SuppressWarnings("unchecked")
  private static final Map<String, Object> VECTORS =
      (Map<String, Object>) MiniJson.read("/vectors/kv-events.json");

  /** Expected error (path, fragment of the problem) of each malformed vector, by name. */
  private static final Map<String, List<String>> MALFORMED =
      Map.of(
          "truncated", List.of("events[0].lora_id", "truncated"),
          "not_msgpack",
              List.of("$", "expected an event batch (an array or a map), found the integer -1"),
          "wrong_shape_string",
              List.of(
                  "$", "expected an event batch (an array or a map), found the string \"hello\""),
          "block_hashes_not_list",
              List.of(
                  "events[0].block_hashes",
                  "expected an array of block hashes, found the string \"oops\""));

  private static final Set<String> EVENT_FIELDS =
      Set.of(
          "type",
          "block_hashes",
          "parent_block_hash",
          "token_ids",
          "block_size",
          "medium",
          "lora_id",
          "lora_name");

  @SuppressWarnings("unchecked")
  private static List<Map<String, Object>> cases(String kind) {
    return (List<Map<String, Object>>) VECTORS.get(kind);
  }

  private static byte[] payload(Map<String, Object> c) {
    return HexFormat.of().parseHex((String) c.get("payload_hex"));
  }

  @Test
  void theVectorFileHasBothKinds() {
    assertThat(cases("decode")).hasSizeGreaterThanOrEqualTo(7);
    assertThat(cases("malformed")).hasSizeGreaterThanOrEqualTo(4);
  }

  @TestFactory
  Stream<DynamicTest> decodeVectors() {
    List<DynamicTest> tests = new ArrayList<>();
    for (Map<String, Object> c : cases("decode")) {
      tests.add(
          DynamicTest.dynamicTest(
              (String) c.get("name"), () -> checkDecode(payload(c), expected(c))));
    }
    return tests.stream();
  }

  @SuppressWarnings("unchecked")
  private static Map<String, Object> expected(Map<String, Object> c) {
    return (Map<String, Object>) c.get("expected");
  }

  @SuppressWarnings("unchecked")
  private static void checkDecode(byte[] payload, Map<String, Object> exp) {
    KvEventBatch b = KvEventDecoder.decode(payload);
    assertThat(b.ts()).as("ts").isEqualTo(((Number) exp.get("ts")).doubleValue());
    Object dp = exp.get("dp_rank");
    assertThat(b.dpRank()).as("dp_rank").isEqualTo(dp == null ? null : ((Number) dp).intValue());
    Object skipped = exp.get("skipped");
    assertThat(b.skipped())
        .as("skipped")
        .isEqualTo(skipped == null ? 0 : ((Number) skipped).intValue());
    List<Map<String, Object>> events = (List<Map<String, Object>>) exp.get("events");
    assertThat(b.events()).as("events").hasSize(events.size());
    for (int i = 0; i < events.size(); i++) {
      checkEvent("events[" + i + "]", b.events().get(i), events.get(i));
    }
  }

  private static void checkEvent(String where, EngineEvent got, Map<String, Object> exp) {
    assertThat(EVENT_FIELDS)
        .as(where + ": every expected field is checked")
        .containsAll(exp.keySet());
    String type = (String) exp.get("type");
    switch (type) {
      case "BlockStored" -> {
        assertThat(got).as(where).isInstanceOf(EngineEvent.BlockStored.class);
        EngineEvent.BlockStored s = (EngineEvent.BlockStored) got;
        assertThat(s.blockHashes())
            .as(where + ".block_hashes")
            .containsExactly(u64s(exp.get("block_hashes")));
        Object parent = exp.get("parent_block_hash");
        assertThat(s.hasParent())
            .as(where + ".parent_block_hash present")
            .isEqualTo(parent != null);
        if (parent != null) {
          assertThat(s.parentBlockHash())
              .as(where + ".parent_block_hash")
              .isEqualTo(Long.parseUnsignedLong((String) parent));
        }
        assertThat(s.tokenIds())
            .as(where + ".token_ids")
            .containsExactly(ints(exp.get("token_ids")));
        assertThat(s.blockSize())
            .as(where + ".block_size")
            .isEqualTo(((Number) exp.get("block_size")).intValue());
        assertThat(s.medium()).as(where + ".medium").isEqualTo(exp.get("medium"));
        Object loraId = exp.get("lora_id");
        assertThat(s.loraId())
            .as(where + ".lora_id")
            .isEqualTo(loraId == null ? null : ((Number) loraId).longValue());
        assertThat(s.loraName()).as(where + ".lora_name").isEqualTo(exp.get("lora_name"));
      }
      case "BlockRemoved" -> {
        assertThat(got).as(where).isInstanceOf(EngineEvent.BlockRemoved.class);
        EngineEvent.BlockRemoved r = (EngineEvent.BlockRemoved) got;
        assertThat(r.blockHashes())
            .as(where + ".block_hashes")
            .containsExactly(u64s(exp.get("block_hashes")));
        assertThat(r.medium()).as(where + ".medium").isEqualTo(exp.get("medium"));
      }
      case "AllBlocksCleared" ->
          assertThat(got).as(where).isInstanceOf(EngineEvent.AllBlocksCleared.class);
      default -> throw new AssertionError(where + ": unknown expected type " + type);
    }
  }

  @SuppressWarnings("unchecked")
  private static long[] u64s(Object list) {
    List<Object> l = (List<Object>) list;
    long[] out = new long[l.size()];
    for (int i = 0; i < out.length; i++) out[i] = Long.parseUnsignedLong((String) l.get(i));
    return out;
  }

  @SuppressWarnings("unchecked")
  private static int[] ints(Object list) {
    List<Object> l = (List<Object>) list;
    int[] out = new int[l.size()];
    for (int i = 0; i < out.length; i++) out[i] = ((Number) l.get(i)).intValue();
    return out;
  }

  @TestFactory
  Stream<DynamicTest> malformedVectors() {
    List<DynamicTest> tests = new ArrayList<>();
    for (Map<String, Object> c : cases("malformed")) {
      String name = (String) c.get("name");
      tests.add(
          DynamicTest.dynamicTest(
              name,
              () -> {
                assertThat(MALFORMED)
                    .as("expectations for malformed vector " + name)
                    .containsKey(name);
                KvEventDecodeException e =
                    catchThrowableOfType(
                        KvEventDecodeException.class, () -> KvEventDecoder.decode(payload(c)));
                assertThat(e).as(name + " is rejected").isNotNull();
                List<String> want = MALFORMED.get(name);
                assertThat(e.path()).as(name + " path").isEqualTo(want.get(0));
                assertThat(e.getMessage())
                    .as(name + " message")
                    .startsWith(want.get(0) + ": ")
                    .contains(want.get(1))
                    .contains("(at byte ");
              }));
    }
    return tests.stream();
  }
}
