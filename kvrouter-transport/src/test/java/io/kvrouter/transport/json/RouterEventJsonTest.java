package io.kvrouter.transport.json;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.List;
import org.junit.jupiter.api.Test;

/** Decoding, encoding and round trips of well-formed events. */
class RouterEventJsonTest {
  private static final String SPEC_EXAMPLE =
      "{\"worker_id\":1,\"event\":{\"event_id\":7,\"data\":{\"stored\":{\"parent_hash\":null,"
          + "\"blocks\":[{\"block_hash\":42,\"tokens_hash\":42}]}},\"dp_rank\":0}}";

  private static RouterEvent roundTrip(RouterEvent e) {
    RouterEvent fromString = RouterEventJson.readEvent(RouterEventJson.writeEvent(e));
    RouterEvent fromBytes = RouterEventJson.readEvent(RouterEventJson.writeEventBytes(e));
    assertThat(fromBytes).isEqualTo(fromString);
    return fromString;
  }

  @Test
  void decodesTheSpecExampleAndWritesItBackVerbatim() {
    RouterEvent e = RouterEventJson.readEvent(SPEC_EXAMPLE);

    assertThat(e)
        .isEqualTo(
            new RouterEvent(
                new Worker(1, 0), 7, CacheEvent.storedAtRoot(new long[] {42}, new long[] {42})));
    assertThat(RouterEventJson.writeEvent(e)).isEqualTo(SPEC_EXAMPLE);
    assertThat(RouterEventJson.writeEventBytes(e))
        .isEqualTo(SPEC_EXAMPLE.getBytes(StandardCharsets.UTF_8));
  }

  @Test
  void decodesTheCapturedDynamoEvent() throws IOException {
    byte[] json;
    try (InputStream in = getClass().getResourceAsStream("/fixtures/dynamo-stored-event.json")) {
      assertThat(in).isNotNull();
      json = in.readAllBytes();
    }

    RouterEvent e = RouterEventJson.readEvent(json);

    assertThat(e.worker()).isEqualTo(new Worker(0, 0));
    assertThat(e.eventId()).isEqualTo(22636961L);
    assertThat(e.data()).isInstanceOf(CacheEvent.Stored.class);
    CacheEvent.Stored s = (CacheEvent.Stored) e.data();
    assertThat(s.hasParent()).isTrue();
    assertThat(s.parentHash()).isEqualTo(270656378982115943L);
    assertThat(s.blockHashes()).containsExactly(2733357436102908004L, 2451106649480522483L);
    assertThat(s.tokensHashes())
        .containsExactly(2825904518766229643L, Long.parseUnsignedLong("10358785732907640880"));
    assertThat(RouterEventJson.readEvent(new String(json, StandardCharsets.UTF_8))).isEqualTo(e);
    assertThat(RouterEventJson.writeEvent(e))
        .isEqualTo(
            "{\"worker_id\":0,\"event\":{\"event_id\":22636961,\"data\":{\"stored\":"
                + "{\"parent_hash\":270656378982115943,\"blocks\":["
                + "{\"block_hash\":2733357436102908004,\"tokens_hash\":2825904518766229643},"
                + "{\"block_hash\":2451106649480522483,\"tokens_hash\":10358785732907640880}]}},"
                + "\"dp_rank\":0}}");
    assertThat(roundTrip(e)).isEqualTo(e);
  }

  @Test
  void hashesAtOrAbove2To63RoundTripAsUnsignedDecimals() {
    long big = Long.parseUnsignedLong("9223372036854775808"); // 2^63
    long max = -1L; // 2^64 - 1
    RouterEvent e =
        new RouterEvent(
            new Worker(max, 3),
            max,
            CacheEvent.stored(
                big, new long[] {max, big, Long.MAX_VALUE}, new long[] {big, max, 0}));

    String json = RouterEventJson.writeEvent(e);

    assertThat(json)
        .contains("\"worker_id\":18446744073709551615")
        .contains("\"event_id\":18446744073709551615")
        .contains("\"parent_hash\":9223372036854775808")
        .contains("\"block_hash\":9223372036854775807")
        .doesNotContain("-");
    assertThat(roundTrip(e)).isEqualTo(e);
  }

  @Test
  void negativeSignedInputIsReadAsBitsAndWrittenBackUnsigned() {
    String json =
        "{\"worker_id\":-1,\"event\":{\"event_id\":-2,\"data\":{\"stored\":{\"parent_hash\":"
            + "-9223372036854775808,\"blocks\":[{\"block_hash\":-3,\"tokens_hash\":-0}]}}}}";

    RouterEvent e = RouterEventJson.readEvent(json);

    assertThat(e.worker().workerId()).isEqualTo(-1L);
    assertThat(e.eventId()).isEqualTo(-2L);
    CacheEvent.Stored s = (CacheEvent.Stored) e.data();
    assertThat(s.parentHash()).isEqualTo(Long.MIN_VALUE);
    assertThat(s.blockHashes()).containsExactly(-3L);
    assertThat(s.tokensHashes()).containsExactly(0L);
    assertThat(RouterEventJson.writeEvent(e))
        .isEqualTo(
            "{\"worker_id\":18446744073709551615,\"event\":{\"event_id\":18446744073709551614,"
                + "\"data\":{\"stored\":{\"parent_hash\":9223372036854775808,\"blocks\":["
                + "{\"block_hash\":18446744073709551613,\"tokens_hash\":0}]}},\"dp_rank\":0}}");
  }

  @Test
  void dpRankDefaultsToZeroAndIsReadInsideEventOrAtTopLevel() {
    String noRank = "{\"worker_id\":5,\"event\":{\"event_id\":1,\"data\":\"cleared\"}}";
    String inEvent =
        "{\"worker_id\":5,\"event\":{\"event_id\":1,\"data\":\"cleared\",\"dp_rank\":2}}";
    String atTop =
        "{\"worker_id\":5,\"dp_rank\":3,\"event\":{\"event_id\":1,\"data\":\"cleared\"}}";
    String both =
        "{\"dp_rank\":4,\"worker_id\":5,\"event\":{\"dp_rank\":4,\"event_id\":1,"
            + "\"data\":\"cleared\"}}";
    String nullRank =
        "{\"worker_id\":5,\"event\":{\"event_id\":1,\"data\":\"cleared\",\"dp_rank\":null}}";

    assertThat(RouterEventJson.readEvent(noRank).worker()).isEqualTo(new Worker(5, 0));
    assertThat(RouterEventJson.readEvent(inEvent).worker()).isEqualTo(new Worker(5, 2));
    assertThat(RouterEventJson.readEvent(atTop).worker()).isEqualTo(new Worker(5, 3));
    assertThat(RouterEventJson.readEvent(both).worker()).isEqualTo(new Worker(5, 4));
    assertThat(RouterEventJson.readEvent(nullRank).worker()).isEqualTo(new Worker(5, 0));
    assertThat(RouterEventJson.writeEvent(RouterEventJson.readEvent(atTop)))
        .isEqualTo(
            "{\"worker_id\":5,\"event\":{\"event_id\":1,\"data\":\"cleared\",\"dp_rank\":3}}");
    RouterEvent maxRank =
        new RouterEvent(new Worker(1, Integer.MAX_VALUE), 1, CacheEvent.cleared());
    assertThat(roundTrip(maxRank)).isEqualTo(maxRank);
  }

  @Test
  void parentNullMissingOrPresent() {
    String nullParent =
        "{\"worker_id\":1,\"event\":{\"event_id\":1,\"data\":{\"stored\":{\"parent_hash\":null,"
            + "\"blocks\":[{\"block_hash\":1,\"tokens_hash\":2}]}}}}";
    String missingParent =
        "{\"worker_id\":1,\"event\":{\"event_id\":1,\"data\":{\"stored\":{"
            + "\"blocks\":[{\"block_hash\":1,\"tokens_hash\":2}]}}}}";
    String withParent =
        "{\"worker_id\":1,\"event\":{\"event_id\":1,\"data\":{\"stored\":{"
            + "\"blocks\":[{\"block_hash\":1,\"tokens_hash\":2}],\"parent_hash\":0}}}}";

    CacheEvent root = CacheEvent.storedAtRoot(new long[] {1}, new long[] {2});
    assertThat(RouterEventJson.readEvent(nullParent).data()).isEqualTo(root);
    assertThat(RouterEventJson.readEvent(missingParent).data()).isEqualTo(root);
    CacheEvent child = RouterEventJson.readEvent(withParent).data();
    assertThat(child).isEqualTo(CacheEvent.stored(0, new long[] {1}, new long[] {2}));
    assertThat(child).isNotEqualTo(root);
    assertThat(RouterEventJson.writeEvent(new RouterEvent(Worker.of(1), 1, child)))
        .contains("\"parent_hash\":0,");
    assertThat(RouterEventJson.writeEvent(new RouterEvent(Worker.of(1), 1, root)))
        .contains("\"parent_hash\":null,");
  }

  @Test
  void removedRoundTrips() {
    String json =
        "{\"worker_id\":9,\"event\":{\"event_id\":3,\"data\":{\"removed\":{\"block_hashes\":"
            + "[1,18446744073709551615,42]}},\"dp_rank\":1}}";

    RouterEvent e = RouterEventJson.readEvent(json);

    assertThat(e).isEqualTo(new RouterEvent(new Worker(9, 1), 3, CacheEvent.removed(1, -1L, 42)));
    assertThat(RouterEventJson.writeEvent(e)).isEqualTo(json);
    RouterEvent empty = new RouterEvent(Worker.of(9), 4, CacheEvent.removed());
    assertThat(RouterEventJson.writeEvent(empty)).contains("{\"removed\":{\"block_hashes\":[]}}");
    assertThat(roundTrip(empty)).isEqualTo(empty);
  }

  @Test
  void removedWithManyHashesGrowsItsBuffer() {
    long[] hashes = new long[1000];
    for (int i = 0; i < hashes.length; i++) hashes[i] = i * 0x9E3779B97F4A7C15L;
    RouterEvent e = new RouterEvent(Worker.of(1), 1, CacheEvent.removed(hashes));
    assertThat(roundTrip(e)).isEqualTo(e);
  }

  @Test
  void storedWithManyBlocksGrowsItsBuffers() {
    long[] blocks = new long[1000];
    long[] tokens = new long[1000];
    for (int i = 0; i < blocks.length; i++) {
      blocks[i] = i * 0x9E3779B97F4A7C15L;
      tokens[i] = ~blocks[i];
    }
    RouterEvent e = new RouterEvent(Worker.of(1), 1, CacheEvent.stored(77, blocks, tokens));
    assertThat(roundTrip(e)).isEqualTo(e);
  }

  @Test
  void largeRemovedThenLargeStoredInOneArray() {
    // regression (found by the randomized test): a removed event once grew the block-hash
    // scratch but not the tokens-hash scratch, and the next stored event overran the latter
    long[] hashes = new long[40];
    for (int i = 0; i < hashes.length; i++) hashes[i] = -i;
    List<RouterEvent> events =
        List.of(
            new RouterEvent(Worker.of(1), 1, CacheEvent.removed(hashes)),
            new RouterEvent(Worker.of(1), 2, CacheEvent.storedAtRoot(hashes, hashes.clone())),
            new RouterEvent(Worker.of(1), 3, CacheEvent.removed(hashes)));

    assertThat(RouterEventJson.readEvents(RouterEventJson.writeEvents(events))).isEqualTo(events);
  }

  @Test
  void clearedAsStringOrAsUnitVariantObject() {
    String asString =
        "{\"worker_id\":2,\"event\":{\"event_id\":8,\"data\":\"cleared\",\"dp_rank\":0}}";
    String asObject = "{\"worker_id\":2,\"event\":{\"event_id\":8,\"data\":{\"cleared\":null}}}";

    RouterEvent e = RouterEventJson.readEvent(asString);

    assertThat(e).isEqualTo(new RouterEvent(Worker.of(2), 8, CacheEvent.cleared()));
    assertThat(RouterEventJson.readEvent(asObject)).isEqualTo(e);
    assertThat(RouterEventJson.writeEvent(e)).isEqualTo(asString);
  }

  @Test
  void arraysOfEventsRoundTrip() {
    List<RouterEvent> events =
        List.of(
            new RouterEvent(
                new Worker(1, 0), 1, CacheEvent.storedAtRoot(new long[] {1, 2}, new long[] {3, 4})),
            new RouterEvent(
                new Worker(1, 0), 2, CacheEvent.stored(2, new long[] {5}, new long[] {6})),
            new RouterEvent(new Worker(2, 1), 1, CacheEvent.removed(1)),
            new RouterEvent(new Worker(-1L, 0), -1L, CacheEvent.cleared()));

    String json = RouterEventJson.writeEvents(events);

    assertThat(json).startsWith("[{\"worker_id\":1,").endsWith("\"dp_rank\":0}}]");
    assertThat(RouterEventJson.readEvents(json)).isEqualTo(events);
    assertThat(RouterEventJson.readEvents(json.getBytes(StandardCharsets.UTF_8))).isEqualTo(events);
    assertThat(RouterEventJson.writeEvents(List.of())).isEqualTo("[]");
    assertThat(RouterEventJson.readEvents(" [ ] ")).isEmpty();
  }

  @Test
  void whitespaceAndFieldOrderDoNotMatter() {
    String json =
        """
        {
          "event": {
            "dp_rank": 1,
            "data": { "stored": { "blocks": [ { "tokens_hash": 2, "block_hash": 1 } ],
                                  "parent_hash": 10 } },
            "event_id": 5
          },
          "worker_id": 4
        }
        """;

    assertThat(RouterEventJson.readEvent(json))
        .isEqualTo(
            new RouterEvent(
                new Worker(4, 1), 5, CacheEvent.stored(10, new long[] {1}, new long[] {2})));
  }
}
