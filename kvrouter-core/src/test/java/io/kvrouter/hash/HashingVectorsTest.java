package io.kvrouter.hash;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.dynatrace.hash4j.hashing.Hashing;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;

/** Every golden vector of {@code vectors/hashing.json} (a copy of the shared file). */
class HashingVectorsTest {
  private static final JsonNode VECTORS = load();

  private static JsonNode load() {
    try (InputStream in = HashingVectorsTest.class.getResourceAsStream("/vectors/hashing.json")) {
      return new ObjectMapper().readTree(in);
    } catch (IOException e) {
      throw new IllegalStateException(e);
    }
  }

  private static long u64(JsonNode n) {
    return Long.parseUnsignedLong(n.asText());
  }

  private static long[] u64s(JsonNode arr) {
    long[] out = new long[arr.size()];
    for (int i = 0; i < out.length; i++) out[i] = u64(arr.get(i));
    return out;
  }

  static byte[] officialBuffer(int len) {
    byte[] buf = new byte[len];
    long gen = 2654435761L;
    for (int i = 0; i < len; i++) {
      buf[i] = (byte) (gen >>> 56);
      gen *= -7046029288634856819L; // 11400714785074694797 as signed bits
    }
    return buf;
  }

  @TestFactory
  Stream<DynamicTest> xxh3OfficialVectors() {
    List<DynamicTest> tests = new ArrayList<>();
    for (JsonNode c : VECTORS.get("xxh3_64_official").get("cases")) {
      int len = c.get("len").asInt();
      tests.add(
          DynamicTest.dynamicTest(
              "len " + len,
              () -> {
                byte[] buf = officialBuffer(len);
                assertThat(Hashing.xxh3_64(0).hashBytesToLong(buf)).isEqualTo(u64(c.get("seed0")));
                assertThat(Hashing.xxh3_64(-7046029288634856819L).hashBytesToLong(buf))
                    .isEqualTo(u64(c.get("seedPrime64")));
                assertThat(Hashing.xxh3_64(1337).hashBytesToLong(buf))
                    .isEqualTo(u64(c.get("seed1337")));
              }));
    }
    return tests.stream();
  }

  @Test
  void rawBlockHash() {
    for (JsonNode c : VECTORS.get("raw_block_hash")) {
      byte[] bytes = c.get("bytes_utf8").asText().getBytes(StandardCharsets.UTF_8);
      assertThat(Hashing.xxh3_64(u64(c.get("seed"))).hashBytesToLong(bytes))
          .isEqualTo(u64(c.get("expected")));
    }
  }

  @TestFactory
  Stream<DynamicTest> localBlockHashes() {
    List<DynamicTest> tests = new ArrayList<>();
    int i = 0;
    for (JsonNode c : VECTORS.get("local_block_hashes")) {
      tests.add(
          DynamicTest.dynamicTest(
              "#" + (i++) + " " + c.get("source").asText(),
              () -> {
                int[] tokens = new int[c.get("tokens").size()];
                for (int t = 0; t < tokens.length; t++) {
                  tokens[t] = (int) c.get("tokens").get(t).asLong(); // u32 as int bits
                }
                BlockHasher h = BlockHasher.of(c.get("block_size").asInt());
                if (c.has("lora_name")) h = h.withLora(c.get("lora_name").asText());
                if (c.has("namespace")) h = h.withNamespace(c.get("namespace").asText());
                Map<Integer, long[]> mm = new HashMap<>();
                if (c.has("mm_hashes_by_block")) {
                  c.get("mm_hashes_by_block")
                      .properties()
                      .forEach(e -> mm.put(Integer.parseInt(e.getKey()), u64s(e.getValue())));
                }
                long[] expected = u64s(c.get("expected"));
                assertThat(h.localHashes(tokens, mm)).containsExactly(expected);
                if (mm.isEmpty()) {
                  assertThat(h.localHashes(tokens)).containsExactly(expected);
                }
              }));
    }
    return tests.stream();
  }

  @TestFactory
  Stream<DynamicTest> sequenceHashes() {
    List<DynamicTest> tests = new ArrayList<>();
    int i = 0;
    for (JsonNode c : VECTORS.get("sequence_hashes")) {
      tests.add(
          DynamicTest.dynamicTest(
              "#" + (i++) + " chain seed " + c.get("chain_seed").asText(),
              () -> {
                long[] local = u64s(c.get("local"));
                long seed = u64(c.get("chain_seed"));
                long[] expected = u64s(c.get("expected"));
                assertThat(SequenceHasher.sequenceHashes(local, seed)).containsExactly(expected);
                for (int k = 1; k < local.length; k++) {
                  assertThat(SequenceHasher.next(expected[k - 1], local[k], seed))
                      .isEqualTo(expected[k]);
                }
                if (seed == SequenceHasher.DEFAULT_CHAIN_SEED) {
                  assertThat(SequenceHasher.sequenceHashes(local)).containsExactly(expected);
                  long[] out = new long[local.length];
                  SequenceHasher.sequenceHashes(local, 0, local.length, 0L, out);
                  assertThat(out).containsExactly(expected);
                }
              }));
    }
    return tests.stream();
  }

  @Test
  void saltsChangeTheSeedNotTheBytes() {
    BlockHasher base = BlockHasher.of(4);
    assertThat(base.seed()).isEqualTo(1337L);
    long lora = Hashing.xxh3_64(0).hashBytesToLong("adapter-a".getBytes(StandardCharsets.UTF_8));
    long ns = Hashing.xxh3_64(1).hashBytesToLong("tenant-a".getBytes(StandardCharsets.UTF_8));
    assertThat(base.withLora("adapter-a").seed()).isEqualTo(1337L + lora);
    assertThat(base.withNamespace("tenant-a").seed()).isEqualTo(1337L + ns);
    assertThat(base.withLora("adapter-a").withNamespace("tenant-a").seed())
        .isEqualTo(1337L + lora + ns);
    assertThat(base.withLora(null).seed()).isEqualTo(1337L);
    assertThat(base.withNamespace("").seed()).isEqualTo(1337L);
  }

  @Test
  void mmHashesAreSortedUnsignedBeforeHashing() {
    int[] tokens = {1, 2, 3, 4};
    BlockHasher h = BlockHasher.of(4);
    long big = -1L; // 2^64-1, largest unsigned
    long[] a = h.localHashes(tokens, Map.of(0, new long[] {big, 5L}));
    long[] b = h.localHashes(tokens, Map.of(0, new long[] {5L, big}));
    assertThat(a).containsExactly(b);
    byte[] bytes = new byte[16 + 16];
    for (int i = 0; i < 4; i++) bytes[i * 4] = (byte) (i + 1);
    bytes[16] = 5;
    for (int i = 24; i < 32; i++) bytes[i] = (byte) 0xff;
    assertThat(a[0]).isEqualTo(Hashing.xxh3_64(1337).hashBytesToLong(bytes));
  }

  @Test
  void invalidInputIsRejectedWithAPreciseMessage() {
    assertThatThrownBy(() -> BlockHasher.of(0))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("blockSize must be >= 1, got 0");
    assertThatThrownBy(() -> BlockHasher.of(4).localHashes(null))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("tokens must not be null");
    assertThatThrownBy(() -> SequenceHasher.sequenceHashes(null))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("localHashes must not be null");
  }

  @Test
  void longPromptsHashEveryBlockIndependently() {
    int[] tokens = new int[1024 + 7];
    for (int i = 0; i < tokens.length; i++) tokens[i] = i * 31 + 7;
    BlockHasher h = BlockHasher.of(16);
    long[] all = h.localHashes(tokens);
    assertThat(all).hasSize(64);
    for (int b = 0; b < 64; b++) {
      int[] one = Arrays.copyOfRange(tokens, b * 16, b * 16 + 16);
      assertThat(h.localHashes(one)).containsExactly(all[b]);
    }
  }
}
