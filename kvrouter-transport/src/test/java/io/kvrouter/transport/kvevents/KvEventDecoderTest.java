package io.kvrouter.transport.kvevents;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.catchThrowableOfType;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.math.BigInteger;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;
import org.msgpack.core.MessageBufferPacker;
import org.msgpack.core.MessagePack;

/** The decoder beyond the shared vectors: every form round-trips, and malformed input is named. */
class KvEventDecoderTest {

  interface Writer {
    void write(MessageBufferPacker p) throws IOException;
  }

  static byte[] msgpack(Writer w) {
    try (MessageBufferPacker p = MessagePack.newDefaultBufferPacker()) {
      w.write(p);
      return p.toByteArray();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  // ------------------------------------------------------------------ round trips

  static List<VllmEncoder> encoders() {
    List<VllmEncoder> out = new ArrayList<>();
    for (VllmEncoder.HashStyle style : VllmEncoder.HashStyle.values()) {
      out.add(new VllmEncoder(false, false, style, "data_parallel_rank", 7));
      out.add(new VllmEncoder(false, true, style, "data_parallel_rank", 7));
      out.add(new VllmEncoder(true, true, style, "data_parallel_rank", 7));
      out.add(new VllmEncoder(true, false, style, "attn_dp_rank", 7));
    }
    return out;
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("encoders")
  void randomBatchesRoundTrip(VllmEncoder encoder) {
    long seed = 20240611L;
    Random rnd = new Random(seed);
    for (int i = 0; i < 300; i++) {
      KvEventBatch batch = randomBatch(rnd, encoder.toString().contains("map events"));
      KvEventBatch back = KvEventDecoder.decode(encoder.encode(batch));
      assertThat(back).as("batch %d of seed %d: %s", i, seed, batch).isEqualTo(batch);
    }
  }

  static KvEventBatch randomBatch(Random rnd, boolean mapEvents) {
    List<EngineEvent> events = new ArrayList<>();
    int n = rnd.nextInt(5);
    for (int i = 0; i < n; i++) {
      switch (rnd.nextInt(3)) {
        case 0 -> events.add(randomStored(rnd, mapEvents));
        case 1 ->
            events.add(
                new EngineEvent.BlockRemoved(
                    randomHashes(rnd, 1 + rnd.nextInt(4)),
                    rnd.nextBoolean() ? "GPU" : null,
                    rnd.nextInt(4) == 0 ? rnd.nextInt(3) : null,
                    // only the map form names a removal's kind (vLLM's positional removal has none)
                    mapEvents && rnd.nextInt(4) == 0 ? "sliding_window" : null));
        default -> events.add(new EngineEvent.AllBlocksCleared());
      }
    }
    Integer dp = rnd.nextBoolean() ? rnd.nextInt(8) : null;
    return new KvEventBatch(rnd.nextDouble() * 1e9, dp, events, 0);
  }

  private static EngineEvent.BlockStored randomStored(Random rnd, boolean mapEvents) {
    int bs = 1 + rnd.nextInt(16);
    int blocks = 1 + rnd.nextInt(4);
    int[] tokens = new int[bs * blocks];
    for (int t = 0; t < tokens.length; t++) tokens[t] = rnd.nextInt();
    boolean parent = rnd.nextBoolean();
    List<List<Object>> extra = null;
    if (rnd.nextInt(3) == 0) {
      extra = new ArrayList<>();
      for (int b = 0; b < blocks; b++) {
        extra.add(
            rnd.nextBoolean()
                ? null
                : List.of(
                    "lora-x", List.of("ab".repeat(32), (long) rnd.nextInt(bs)), new byte[] {1, 2}));
      }
    }
    return new EngineEvent.BlockStored(
        randomHashes(rnd, blocks),
        parent,
        parent ? rnd.nextLong() : 0L,
        tokens,
        bs,
        rnd.nextInt(4) == 0 ? (long) rnd.nextInt(100) : null,
        rnd.nextBoolean() ? "GPU" : rnd.nextBoolean() ? "CPU" : null,
        rnd.nextInt(3) == 0 ? "adapter-" + rnd.nextInt(3) : null,
        extra,
        rnd.nextInt(4) == 0 ? rnd.nextInt(3) : null,
        rnd.nextInt(4) == 0 ? "full_attention" : null,
        rnd.nextInt(4) == 0 ? 1 + rnd.nextInt(8192) : null,
        mapEvents && rnd.nextInt(4) == 0 ? "salt-" + rnd.nextInt(5) : null);
  }

  private static long[] randomHashes(Random rnd, int n) {
    long[] h = new long[n];
    for (int i = 0; i < n; i++) h[i] = rnd.nextLong();
    return h;
  }

  // ------------------------------------------------------------------ accepted shapes

  @Test
  void shortRawBytesAreZeroExtendedAndLongOnesKeepTheirLastEightBytes() {
    byte[] payload =
        msgpack(
            p -> {
              p.packArrayHeader(2).packDouble(1);
              p.packArrayHeader(1).packArrayHeader(2).packString("BlockRemoved");
              p.packArrayHeader(2);
              p.packBinaryHeader(3).writePayload(new byte[] {1, 2, 3});
              byte[] longer = new byte[12];
              Arrays.fill(longer, (byte) 0xee);
              longer[11] = 0x01;
              longer[4] = 0x7f;
              p.packBinaryHeader(12).writePayload(longer);
            });
    EngineEvent.BlockRemoved r =
        (EngineEvent.BlockRemoved) KvEventDecoder.decode(payload).events().get(0);
    assertThat(r.blockHashes()).containsExactly(0x010203L, 0x7feeeeeeeeeeee01L);
  }

  /**
   * vLLM 0.26's map form as its OffloadingConnector sends it in one batch with the GPU events: a
   * placeholder CPU store (no tokens, block_size 0) must not reject the batch, and events about a
   * remote copy ({@code locality} REMOTE) are skipped and counted.
   */
  @Test
  void offloadPlaceholdersDecodeAndRemoteCopiesAreSkipped() {
    byte[] payload =
        msgpack(
            p -> {
              p.packArrayHeader(3).packDouble(1.5).packArrayHeader(4);
              p.packMapHeader(5).packString("type").packString("BlockStored");
              p.packString("block_hashes").packArrayHeader(1).packInt(7);
              p.packString("parent_block_hash").packNil();
              p.packString("token_ids").packArrayHeader(2).packInt(1).packInt(2);
              p.packString("block_size").packInt(2);
              p.packMapHeader(6).packString("type").packString("BlockStored");
              p.packString("block_hashes").packArrayHeader(1).packInt(7);
              p.packString("parent_block_hash").packNil();
              p.packString("token_ids").packArrayHeader(0);
              p.packString("block_size").packInt(0);
              p.packString("medium").packString("CPU");
              p.packMapHeader(7).packString("type").packString("BlockStored");
              p.packString("block_hashes").packArrayHeader(1).packInt(8);
              p.packString("parent_block_hash").packNil();
              p.packString("token_ids").packArrayHeader(2).packInt(3).packInt(4);
              p.packString("block_size").packInt(2);
              p.packString("medium").packString("STORAGE");
              p.packString("locality").packString("REMOTE");
              p.packMapHeader(4).packString("type").packString("BlockRemoved");
              p.packString("block_hashes").packArrayHeader(1).packInt(8);
              p.packString("medium").packString("CPU");
              p.packString("locality").packString("remote");
              p.packInt(0);
            });
    KvEventBatch b = KvEventDecoder.decode(payload);
    assertThat(b.skipped()).isEqualTo(2);
    assertThat(b.events()).hasSize(2);
    EngineEvent.BlockStored placeholder = (EngineEvent.BlockStored) b.events().get(1);
    assertThat(placeholder.blockSize()).isZero();
    assertThat(placeholder.tokenIds()).isEmpty();
    assertThat(placeholder.medium()).isEqualTo("CPU");
  }

  @Test
  void aMapStoreWithoutABlockSizeIsStillMalformed() {
    byte[] payload =
        msgpack(
            p -> {
              p.packArrayHeader(2).packDouble(1).packArrayHeader(1);
              p.packMapHeader(3).packString("type").packString("BlockStored");
              p.packString("block_hashes").packArrayHeader(1).packInt(7);
              p.packString("token_ids").packArrayHeader(0);
            });
    assertThatThrownBy(() -> KvEventDecoder.decode(payload))
        .isInstanceOf(KvEventDecodeException.class)
        .hasMessageContaining("block_size");
  }

  @Test
  void aMapEventMayNameItsTypeAnywhereAndUnknownFieldsAreSkipped() {
    byte[] payload =
        msgpack(
            p -> {
              p.packMapHeader(2).packString("events");
              p.packArrayHeader(1).packMapHeader(5);
              p.packString("block_size").packInt(2);
              p.packString("future").packMapHeader(1).packString("x").packArrayHeader(0);
              p.packString("token_ids").packArrayHeader(2).packInt(5).packInt(6);
              p.packString("type").packString("BlockStored");
              p.packString("block_hashes").packArrayHeader(1).packInt(9);
              p.packString("ts").packInt(3);
            });
    KvEventBatch b = KvEventDecoder.decode(payload);
    assertThat(b.ts()).isEqualTo(3.0);
    assertThat(b.events())
        .containsExactly(EngineEvent.BlockStored.of(new long[] {9}, null, new int[] {5, 6}, 2));
  }

  @Test
  void anUnknownMapEventWhoseTypeComesFirstIsSkippedUnread() {
    byte[] payload =
        msgpack(
            p -> {
              p.packArrayHeader(2).packDouble(1);
              p.packArrayHeader(2);
              p.packMapHeader(2).packString("type").packString("BlockMoved");
              p.packString("block_size").packString("not a number");
              p.packMapHeader(1).packString("type").packString("AllBlocksCleared");
            });
    KvEventBatch b = KvEventDecoder.decode(payload);
    assertThat(b.skipped()).isEqualTo(1);
    assertThat(b.events()).containsExactly(new EngineEvent.AllBlocksCleared());
  }

  @Test
  void positionalEventsIgnoreFieldsBeyondTheOnesTheDecoderKnows() {
    byte[] payload =
        msgpack(
            p -> {
              p.packArrayHeader(4).packDouble(1);
              p.packArrayHeader(2);
              p.packArrayHeader(14).packString("BlockStored");
              p.packArrayHeader(1).packInt(1).packNil();
              p.packArrayHeader(1).packInt(7).packInt(1);
              p.packNil().packString("CPU").packString("lora").packNil();
              p.packInt(1).packString("sliding_window").packInt(128);
              p.packString("newer").packArrayHeader(1).packInt(1);
              p.packArrayHeader(6).packString("BlockRemoved");
              p.packArrayHeader(1).packInt(1).packNil().packNil().packNil().packString("x");
              p.packInt(0); // dp rank
              p.packString("more batch fields");
            });
    KvEventBatch b = KvEventDecoder.decode(payload);
    assertThat(b.dpRank()).isZero();
    EngineEvent.BlockStored s = (EngineEvent.BlockStored) b.events().get(0);
    assertThat(s.medium()).isEqualTo("CPU");
    assertThat(s.loraName()).isEqualTo("lora");
    assertThat(s.groupIdx()).isEqualTo(1);
    assertThat(s.kvCacheSpecKind()).isEqualTo("sliding_window");
    assertThat(s.kvCacheSpecSlidingWindow()).isEqualTo(128);
    assertThat(b.events().get(1)).isEqualTo(EngineEvent.BlockRemoved.of(1));
  }

  @Test
  void theRankMayBeNamedThreeWaysAndTheSameRankTwiceIsFine() {
    for (String name : List.of("data_parallel_rank", "attn_dp_rank", "dp_rank")) {
      byte[] payload =
          msgpack(
              p ->
                  p.packMapHeader(3)
                      .packString("ts")
                      .packDouble(1)
                      .packString("events")
                      .packArrayHeader(0)
                      .packString(name)
                      .packInt(4));
      assertThat(KvEventDecoder.decode(payload).dpRank()).as(name).isEqualTo(4);
    }
    byte[] both =
        msgpack(
            p ->
                p.packMapHeader(4)
                    .packString("ts")
                    .packDouble(1)
                    .packString("events")
                    .packArrayHeader(0)
                    .packString("attn_dp_rank")
                    .packInt(2)
                    .packString("data_parallel_rank")
                    .packInt(2));
    assertThat(KvEventDecoder.decode(both).dpRank()).isEqualTo(2);
  }

  @Test
  void decodesASliceOfALargerArray() {
    byte[] inner =
        VllmEncoder.arrayLike()
            .encode(new KvEventBatch(1, 0, List.of(new EngineEvent.AllBlocksCleared()), 0));
    byte[] outer = new byte[inner.length + 6];
    System.arraycopy(inner, 0, outer, 3, inner.length);
    assertThat(KvEventDecoder.decode(outer, 3, inner.length).events()).hasSize(1);
  }

  // ------------------------------------------------------------------ malformed

  record Bad(String name, byte[] payload, String path, String problem) {
    @Override
    public String toString() {
      return name;
    }
  }

  private static final BigInteger U64_MAX = BigInteger.ONE.shiftLeft(64).subtract(BigInteger.ONE);

  private static byte[] oneEvent(Writer event) {
    return msgpack(
        p -> {
          p.packArrayHeader(2).packDouble(1).packArrayHeader(1);
          event.write(p);
        });
  }

  static List<Bad> malformed() {
    return List.of(
        new Bad("empty payload", new byte[0], "$", "found an empty payload"),
        new Bad(
            "bytes after the batch",
            msgpack(p -> p.packArrayHeader(2).packDouble(1).packArrayHeader(0).packInt(1)),
            "$",
            "found 1 more bytes"),
        new Bad(
            "batch array of one",
            msgpack(p -> p.packArrayHeader(1).packDouble(1)),
            "$",
            "found 1 element"),
        new Bad(
            "ts is a string",
            msgpack(p -> p.packArrayHeader(2).packString("now").packArrayHeader(0)),
            "ts",
            "expected a timestamp (a number), found the string \"now\""),
        new Bad(
            "events is a map",
            msgpack(p -> p.packArrayHeader(2).packDouble(1).packMapHeader(0)),
            "events",
            "expected an array of events, found a map of 0 entries"),
        new Bad(
            "negative dp rank",
            msgpack(p -> p.packArrayHeader(3).packDouble(1).packArrayHeader(0).packInt(-1)),
            "data_parallel_rank",
            "found the integer -1 (out of range)"),
        new Bad(
            "contradicting ranks",
            msgpack(
                p ->
                    p.packMapHeader(4)
                        .packString("ts")
                        .packDouble(1)
                        .packString("events")
                        .packArrayHeader(0)
                        .packString("attn_dp_rank")
                        .packInt(1)
                        .packString("data_parallel_rank")
                        .packInt(2)),
            "data_parallel_rank",
            "rank 2 contradicts attn_dp_rank 1"),
        new Bad(
            "map batch without events",
            msgpack(p -> p.packMapHeader(1).packString("ts").packDouble(1)),
            "events",
            "missing required field"),
        new Bad(
            "map batch with ts twice",
            msgpack(
                p ->
                    p.packMapHeader(3)
                        .packString("ts")
                        .packDouble(1)
                        .packString("ts")
                        .packDouble(2)
                        .packString("events")
                        .packArrayHeader(0)),
            "ts",
            "duplicate field"),
        new Bad(
            "non-string key",
            msgpack(p -> p.packMapHeader(1).packInt(1).packInt(2)),
            "$",
            "expected a field name (a string), found the integer 1"),
        new Bad(
            "event is a number", oneEvent(p -> p.packInt(3)), "events[0]", "found the integer 3"),
        new Bad(
            "empty event array",
            oneEvent(p -> p.packArrayHeader(0)),
            "events[0]",
            "found an empty array"),
        new Bad(
            "event tag is an integer",
            oneEvent(p -> p.packArrayHeader(1).packInt(7)),
            "events[0].type",
            "expected the event type (a string), found the integer 7"),
        new Bad(
            "BlockStored with three fields",
            oneEvent(
                p ->
                    p.packArrayHeader(4)
                        .packString("BlockStored")
                        .packArrayHeader(0)
                        .packNil()
                        .packArrayHeader(0)),
            "events[0]",
            "found only 3 fields"),
        new Bad(
            "negative block size",
            oneEvent(
                p ->
                    p.packArrayHeader(5)
                        .packString("BlockStored")
                        .packArrayHeader(0)
                        .packNil()
                        .packArrayHeader(0)
                        .packInt(-1)),
            "events[0].block_size",
            "expected a block size (an integer >= 0), found the integer -1 (out of range)"),
        new Bad(
            "token id beyond 32 bits",
            oneEvent(
                p ->
                    p.packArrayHeader(5)
                        .packString("BlockStored")
                        .packArrayHeader(0)
                        .packNil()
                        .packArrayHeader(2)
                        .packInt(1)
                        .packLong(1L << 32)
                        .packInt(2)),
            "events[0].token_ids[1]",
            "token id 4294967296 is outside 0..4294967295"),
        new Bad(
            "negative token id",
            oneEvent(
                p ->
                    p.packArrayHeader(5)
                        .packString("BlockStored")
                        .packArrayHeader(0)
                        .packNil()
                        .packArrayHeader(3)
                        .packInt(1)
                        .packInt(2)
                        .packInt(-1)
                        .packInt(2)),
            "events[0].token_ids[2]",
            "token id -1 is outside 0..4294967295"),
        new Bad(
            "token id 2^64-1 (a uint64)",
            oneEvent(
                p ->
                    p.packArrayHeader(5)
                        .packString("BlockStored")
                        .packArrayHeader(0)
                        .packNil()
                        .packArrayHeader(1)
                        .packBigInteger(U64_MAX)
                        .packInt(2)),
            "events[0].token_ids[0]",
            "token id 18446744073709551615 is outside 0..4294967295"),
        new Bad(
            "token id is a string",
            oneEvent(
                p ->
                    p.packArrayHeader(5)
                        .packString("BlockStored")
                        .packArrayHeader(0)
                        .packNil()
                        .packArrayHeader(1)
                        .packString("7")
                        .packInt(2)),
            "events[0].token_ids[0]",
            "expected a token id in 0..4294967295, found the string \"7\""),
        new Bad(
            "hash is a float",
            oneEvent(
                p ->
                    p.packArrayHeader(2)
                        .packString("BlockRemoved")
                        .packArrayHeader(1)
                        .packDouble(1.5)),
            "events[0].block_hashes[0]",
            "expected a block hash (an integer or bytes), found the float 1.5"),
        new Bad(
            "empty byte hash",
            oneEvent(
                p ->
                    p.packArrayHeader(2)
                        .packString("BlockRemoved")
                        .packArrayHeader(1)
                        .packBinaryHeader(0)),
            "events[0].block_hashes[0]",
            "found an empty byte string"),
        new Bad(
            "parent is a string",
            oneEvent(
                p ->
                    p.packArrayHeader(5)
                        .packString("BlockStored")
                        .packArrayHeader(0)
                        .packString("p")
                        .packArrayHeader(0)
                        .packInt(1)),
            "events[0].parent_block_hash",
            "found the string \"p\""),
        new Bad(
            "medium is a number",
            oneEvent(
                p -> p.packArrayHeader(3).packString("BlockRemoved").packArrayHeader(0).packInt(1)),
            "events[0].medium",
            "expected a string or nil, found the integer 1"),
        new Bad(
            "extra key entry is a string",
            oneEvent(
                p -> {
                  p.packArrayHeader(9)
                      .packString("BlockStored")
                      .packArrayHeader(0)
                      .packNil()
                      .packArrayHeader(0)
                      .packInt(1)
                      .packNil()
                      .packNil()
                      .packNil();
                  p.packArrayHeader(1).packString("salt");
                }),
            "events[0].extra_keys[0]",
            "expected nil or an array of extra keys"),
        new Bad(
            "map event without type",
            oneEvent(p -> p.packMapHeader(1).packString("block_hashes").packArrayHeader(0)),
            "events[0].type",
            "missing required field"),
        new Bad(
            "map BlockStored without token_ids",
            oneEvent(
                p ->
                    p.packMapHeader(3)
                        .packString("type")
                        .packString("BlockStored")
                        .packString("block_hashes")
                        .packArrayHeader(0)
                        .packString("block_size")
                        .packInt(4)),
            "events[0].token_ids",
            "missing required field"),
        new Bad(
            "map event with medium twice",
            oneEvent(
                p ->
                    p.packMapHeader(4)
                        .packString("type")
                        .packString("BlockRemoved")
                        .packString("medium")
                        .packString("GPU")
                        .packString("block_hashes")
                        .packArrayHeader(0)
                        .packString("medium")
                        .packString("CPU")),
            "events[0].medium",
            "duplicate field"),
        new Bad(
            "the never-used byte",
            new byte[] {(byte) 0x92, (byte) 0xc1, (byte) 0x90},
            "ts",
            "not msgpack: found the byte 0xc1"),
        new Bad(
            "forged array header",
            new byte[] {
              (byte) 0x92, 0x01, (byte) 0xdd, 0x7f, (byte) 0xff, (byte) 0xff, (byte) 0xff
            },
            "events",
            "truncated): it declares 2147483647 elements but only 0 bytes are left"),
        new Bad(
            "extra keys nested too deep",
            oneEvent(
                p -> {
                  p.packArrayHeader(9)
                      .packString("BlockStored")
                      .packArrayHeader(0)
                      .packNil()
                      .packArrayHeader(0)
                      .packInt(1)
                      .packNil()
                      .packNil()
                      .packNil();
                  p.packArrayHeader(1);
                  for (int i = 0; i < 40; i++) p.packArrayHeader(1);
                  p.packNil();
                }),
            "events[0].extra_keys[0]",
            "values nest deeper than 32 levels"));
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("malformed")
  void malformedPayloadsNameTheFieldAndTheProblem(Bad bad) {
    KvEventDecodeException e =
        catchThrowableOfType(
            KvEventDecodeException.class, () -> KvEventDecoder.decode(bad.payload()));
    assertThat(e).as("%s is rejected", bad.name()).isNotNull();
    assertThat(e.path()).as("path").isEqualTo(bad.path());
    assertThat(e.getMessage()).startsWith(bad.path() + ": ").contains(bad.problem());
    assertThat(e.offset()).isBetween(0L, (long) bad.payload().length);
  }

  @Test
  void everyTruncationOfAValidPayloadIsRejectedNotMisread() {
    Random rnd = new Random(5);
    for (VllmEncoder enc : encoders()) {
      for (int i = 0; i < 8; i++) {
        byte[] whole = enc.encode(randomBatch(rnd, true));
        for (int cut = 0; cut < whole.length; cut++) {
          int len = cut;
          KvEventDecodeException e =
              catchThrowableOfType(
                  KvEventDecodeException.class, () -> KvEventDecoder.decode(whole, 0, len));
          assertThat(e).as("%s cut at %d of %d", enc, cut, whole.length).isNotNull();
        }
      }
    }
  }

  /**
   * Regression (found by KvEventDecoderFuzzTest): an ignored value that declares a container far
   * larger than the payload used to end msgpack-core's skipValue early (its int count overflowed),
   * so the bytes after the forged header were read as the next field and a truncated payload
   * decoded. Each of these must be rejected as truncated, wherever the ignored value sits.
   */
  @Test
  void aForgedHugeLengthInAnIgnoredValueIsATruncatedPayload() {
    String ts = "a27473cb3ff0000000000000"; // "ts": 1.0
    String events = "a66576656e747390"; // "events": []
    String[] payloads = {
      // {"x": [array32 of 2^31-1], "ts": 1.0, "events": []}
      "83a1789" + "1dd7fffffff" + ts + events,
      // {"x": [map32 of 2^30], ...}: the map's two values per entry overflow the count
      "83a1789" + "1df40000000" + ts + events,
      // [1.0, [], nil, [array32 of 2^31-1], nil]: ignored trailing batch elements
      "95cb3ff000000000000090c091dd7fffffffc0",
      // [1.0, [["Unknown", [array32 of 2^31-1], 1]]]: an unknown event's fields
      "92cb3ff00000000000009193a7556e6b6e6f776e91dd7fffffff01",
    };
    for (String hex : payloads) {
      byte[] payload = HexFormat.of().parseHex(hex);
      KvEventDecodeException e =
          catchThrowableOfType(KvEventDecodeException.class, () -> KvEventDecoder.decode(payload));
      assertThat(e).as(hex).isNotNull();
      assertThat(e.getMessage()).as(hex).contains("(truncated): it declares");
    }
  }
}
