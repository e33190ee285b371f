package io.kvrouter.transport.kvevents;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowableOfType;

import com.sun.management.ThreadMXBean;
import java.lang.management.ManagementFactory;
import java.math.BigInteger;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;

/**
 * Unsigned 64-bit integers of 2^63 and more (msgpack uint64 with the top bit set): read in place as
 * their bit pattern wherever they may appear, and without a {@link BigInteger} per value.
 */
class Uint64DecodingTest {
  private static final BigInteger TWO_63 = BigInteger.ONE.shiftLeft(63);
  private static final BigInteger U64_MAX = BigInteger.ONE.shiftLeft(64).subtract(BigInteger.ONE);

  @Test
  void hashesParentsAndLoraIdsKeepTheirBitPattern() {
    byte[] payload =
        KvEventDecoderTest.msgpack(
            p -> {
              p.packArrayHeader(2).packBigInteger(U64_MAX).packArrayHeader(2);
              p.packArrayHeader(6).packString("BlockStored");
              p.packArrayHeader(3)
                  .packBigInteger(TWO_63)
                  .packBigInteger(U64_MAX)
                  .packBigInteger(TWO_63.add(BigInteger.ONE));
              p.packBigInteger(U64_MAX.subtract(BigInteger.ONE)); // parent
              p.packArrayHeader(3).packLong(0).packLong(4294967295L).packLong(7);
              p.packInt(1);
              p.packBigInteger(TWO_63); // lora_id
              p.packMapHeader(3).packString("type").packString("BlockRemoved");
              p.packString("block_hashes").packArrayHeader(1).packBigInteger(U64_MAX);
              p.packString("unknown").packBigInteger(U64_MAX); // skipped
            });
    KvEventBatch b = KvEventDecoder.decode(payload);
    assertThat(b.ts()).isEqualTo(0x1p64);
    EngineEvent.BlockStored s = (EngineEvent.BlockStored) b.events().get(0);
    assertThat(s.blockHashes()).containsExactly(Long.MIN_VALUE, -1L, Long.MIN_VALUE + 1);
    assertThat(s.hasParent()).isTrue();
    assertThat(s.parentBlockHash()).isEqualTo(-2L);
    assertThat(s.tokenIds()).as("2^32-1 is a token id, kept as int bits").containsExactly(0, -1, 7);
    assertThat(s.loraId()).isEqualTo(Long.MIN_VALUE);
    EngineEvent.BlockRemoved r = (EngineEvent.BlockRemoved) b.events().get(1);
    assertThat(r.blockHashes()).containsExactly(-1L);
  }

  @Test
  void extraKeysKeepTheBitPatternToo() {
    byte[] payload =
        KvEventDecoderTest.msgpack(
            p -> {
              p.packArrayHeader(2).packInt(1).packArrayHeader(1);
              p.packArrayHeader(9).packString("BlockStored");
              p.packArrayHeader(1).packInt(5).packNil().packArrayHeader(1).packInt(1).packInt(1);
              p.packNil().packNil().packNil();
              p.packArrayHeader(1).packArrayHeader(1).packBigInteger(U64_MAX); // extra_keys
            });
    EngineEvent.BlockStored s =
        (EngineEvent.BlockStored) KvEventDecoder.decode(payload).events().get(0);
    assertThat(s.extraKeys()).isEqualTo(List.of(List.of(-1L)));
  }

  @Test
  void aBoundedFieldRejectsThemAsTooBig() {
    byte[] payload =
        KvEventDecoderTest.msgpack(
            p -> {
              p.packArrayHeader(3).packInt(1).packArrayHeader(0).packBigInteger(U64_MAX);
            });
    KvEventDecodeException e =
        catchThrowableOfType(KvEventDecodeException.class, () -> KvEventDecoder.decode(payload));
    assertThat(e.getMessage())
        .isEqualTo(
            "data_parallel_rank: expected a data-parallel rank (an integer >= 0), found the integer"
                + " 18446744073709551615 (too big) (at byte 12)");
  }

  @Test
  void timestampsRoundToTheNearestDoubleAsBigIntegerDoes() {
    Random rnd = new Random(11);
    long[] edges = {Long.MIN_VALUE, -1L, Long.MIN_VALUE + 1, -1025L, -1024L, -3073L, -2049L};
    for (int i = 0; i < 2_000; i++) {
      long bits = i < edges.length ? edges[i] : rnd.nextLong() | Long.MIN_VALUE;
      double expected = new BigInteger(Long.toUnsignedString(bits)).doubleValue();
      assertThat(BatchReader.unsignedToDouble(bits))
          .as("%s (seed 11)", Long.toUnsignedString(bits))
          .isEqualTo(expected);
    }
  }

  /**
   * Decoding 256 hashes of 2^63 and more allocates no more than decoding 256 one-byte hashes: the
   * same arrays and events, nothing per value. One BigInteger per value would add at least 40 bytes
   * each (10 KB per batch); the bound allows 8 bytes per hash.
   */
  @Test
  void largeValuesAllocateNothingPerValue() {
    int n = 256;
    Random rnd = new Random(3);
    long[] large = new long[n];
    for (int i = 0; i < n; i++) large[i] = rnd.nextLong() | Long.MIN_VALUE;
    large[0] = -1L; // 2^64-1
    large[1] = Long.MIN_VALUE; // 2^63
    byte[] u64 = removed(large, true);
    byte[] small = removed(new long[n], false);
    assertThat(u64.length).as("9 bytes per hash").isGreaterThan(9 * n);

    ThreadMXBean mx = (ThreadMXBean) ManagementFactory.getThreadMXBean();
    assertThat(mx.isThreadAllocatedMemorySupported()).isTrue();
    mx.setThreadAllocatedMemoryEnabled(true);
    int rounds = 200;
    allocatedPerDecode(mx, u64, 50); // class loading and the first compilations out of the way
    allocatedPerDecode(mx, small, 50);
    long perLarge = allocatedPerDecode(mx, u64, rounds);
    long perSmall = allocatedPerDecode(mx, small, rounds);
    assertThat(perLarge - perSmall)
        .as("bytes per decode: %d with 2^63+ hashes, %d with one-byte ones", perLarge, perSmall)
        .isLessThan(8L * n);
    EngineEvent.BlockRemoved r =
        (EngineEvent.BlockRemoved) KvEventDecoder.decode(u64).events().get(0);
    assertThat(r.blockHashes()).containsExactly(large);
  }

  private static long allocatedPerDecode(ThreadMXBean mx, byte[] payload, int rounds) {
    long sum = 0;
    long before = mx.getCurrentThreadAllocatedBytes();
    for (int i = 0; i < rounds; i++) {
      KvEventBatch b = KvEventDecoder.decode(payload);
      sum += ((EngineEvent.BlockRemoved) b.events().get(0)).blockHashes()[1];
    }
    long after = mx.getCurrentThreadAllocatedBytes();
    assertThat(sum).isNotEqualTo(1); // keeps the results alive
    return (after - before) / rounds;
  }

  private static byte[] removed(long[] hashes, boolean unsigned) {
    return KvEventDecoderTest.msgpack(
        p -> {
          p.packArrayHeader(2).packInt(1).packArrayHeader(1);
          p.packArrayHeader(2).packString("BlockRemoved").packArrayHeader(hashes.length);
          for (long h : hashes) {
            if (unsigned) {
              p.packBigInteger(new BigInteger(Long.toUnsignedString(h)));
            } else {
              p.packLong(h);
            }
          }
        });
  }
}
