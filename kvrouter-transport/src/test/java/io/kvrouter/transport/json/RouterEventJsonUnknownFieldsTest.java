package io.kvrouter.transport.json;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import java.util.List;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Unknown fields of every shape, at every level of the wire form, are skipped without changing what
 * is decoded.
 */
class RouterEventJsonUnknownFieldsTest {
  /** Values of every JSON shape, including nested ones that a naive skip would trip over. */
  static List<String> unknownValues() {
    return List.of(
        "null",
        "true",
        "\"block_hash\"",
        "-1.5e300",
        "123456789012345678901234567890",
        "{}",
        "[]",
        "{\"block_hash\":1,\"blocks\":[{\"tokens_hash\":\"x\"}],\"deep\":{\"a\":[[{}],[1,2]]}}",
        "[{\"event\":{\"data\":\"cleared\"}},[null,[\"]\"]],\"}\"]",
        "{\"mm_hashes\":[18446744073709551615,3],\"offsets\":[[0,4],[4,8]]}");
  }

  private static String stored(String x) {
    return "{\"worker_id\":7,\"unknown_top\":"
        + x
        + ",\"event\":{\"unknown_event\":"
        + x
        + ",\"event_id\":11,\"data\":{\"unknown_data\":"
        + x
        + ",\"stored\":{\"unknown_stored\":"
        + x
        + ",\"parent_hash\":5,\"start_position\":"
        + x
        + ",\"blocks\":[{\"unknown_block\":"
        + x
        + ",\"block_hash\":1,\"mm_extra_info\":"
        + x
        + ",\"tokens_hash\":2},{\"block_hash\":3,\"tokens_hash\":4,\"mm_extra_info\":"
        + x
        + "}]},\"unknown_after_stored\":"
        + x
        + "},\"dp_rank\":2,\"unknown_last\":"
        + x
        + "},\"storage_tier\":"
        + x
        + "}";
  }

  private static String removed(String x) {
    return "{\"event\":{\"data\":{\"removed\":{\"unknown_removed\":"
        + x
        + ",\"block_hashes\":[8,9],\"more\":"
        + x
        + "}},\"event_id\":12},\"worker_id\":7,\"dp_rank\":2}";
  }

  private static String cleared(String x) {
    return "{\"worker_id\":7,\"event\":{\"event_id\":13,\"data\":\"cleared\",\"extra\":"
        + x
        + "},\"extra\":"
        + x
        + "}";
  }

  @ParameterizedTest(name = "unknown value {0}")
  @MethodSource("unknownValues")
  void unknownFieldsAreSkippedInStored(String x) {
    assertThat(RouterEventJson.readEvent(stored(x)))
        .isEqualTo(
            new RouterEvent(
                new Worker(7, 2), 11, CacheEvent.stored(5, new long[] {1, 3}, new long[] {2, 4})));
  }

  @ParameterizedTest(name = "unknown value {0}")
  @MethodSource("unknownValues")
  void unknownFieldsAreSkippedInRemoved(String x) {
    assertThat(RouterEventJson.readEvent(removed(x)))
        .isEqualTo(new RouterEvent(new Worker(7, 2), 12, CacheEvent.removed(8, 9)));
  }

  @ParameterizedTest(name = "unknown value {0}")
  @MethodSource("unknownValues")
  void unknownFieldsAreSkippedInCleared(String x) {
    assertThat(RouterEventJson.readEvent(cleared(x)))
        .isEqualTo(new RouterEvent(Worker.of(7), 13, CacheEvent.cleared()));
  }

  @ParameterizedTest(name = "unknown value {0}")
  @MethodSource("unknownValues")
  void unknownFieldsAreSkippedInEveryElementOfAnArray(String x) {
    String json = "[" + stored(x) + "," + removed(x) + "," + cleared(x) + "]";

    assertThat(RouterEventJson.readEvents(json))
        .extracting(RouterEvent::eventId)
        .containsExactly(11L, 12L, 13L);
  }
}
