package io.kvrouter.hash;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.dynatrace.hash4j.hashing.Hashing;
import java.util.Arrays;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/**
 * {@link BlockHasher#hashes}, the local and sequence hashes in one pass, against DESIGN.md §2 built
 * here byte by byte (each block's tokens as 4-byte little-endian values into a fresh array, the
 * chain's two 8-byte values likewise), on seeded random prompts, block sizes (including past the
 * hasher's 8,192-token chunk) and salts. The output arrays start full of stale values, so a block
 * left unwritten would show. The seed of a failing case is in the message.
 */
class BlockHasherHashesTest {
  private static final long BASE_SEED = 0x37_2026L;

  private static long[] refLocal(int[] tokens, int blockSize, long seed) {
    long[] out = new long[tokens.length / blockSize];
    for (int b = 0; b < out.length; b++) {
      byte[] bytes = new byte[blockSize * 4];
      for (int i = 0; i < blockSize; i++) {
        int v = tokens[b * blockSize + i];
        for (int k = 0; k < 4; k++) bytes[4 * i + k] = (byte) (v >>> (8 * k));
      }
      out[b] = Hashing.xxh3_64(seed).hashBytesToLong(bytes);
    }
    return out;
  }

  private static long[] refSequence(long[] local) {
    long[] out = new long[local.length];
    for (int i = 0; i < local.length; i++) {
      if (i == 0) {
        out[0] = local[0];
        continue;
      }
      byte[] bytes = new byte[16];
      for (int k = 0; k < 8; k++) bytes[k] = (byte) (out[i - 1] >>> (8 * k));
      for (int k = 0; k < 8; k++) bytes[8 + k] = (byte) (local[i] >>> (8 * k));
      out[i] = Hashing.xxh3_64(1337).hashBytesToLong(bytes);
    }
    return out;
  }

  @Test
  void hashesEqualTheReferenceAndTheTwoStepPath() {
    for (int c = 0; c < 300; c++) {
      long seed = BASE_SEED + c;
      SplittableRandom r = new SplittableRandom(seed);
      int blockSize =
          switch (r.nextInt(4)) {
            case 0 -> 16;
            case 1 -> 1 + r.nextInt(70);
            case 2 -> 8193 + r.nextInt(100);
            default -> 32;
          };
      int[] tokens = new int[r.nextInt(c % 10 == 0 ? 20_000 : 2_500)];
      for (int i = 0; i < tokens.length; i++) tokens[i] = r.nextInt();
      BlockHasher hasher = BlockHasher.of(blockSize);
      long hashSeed = 1337;
      if (r.nextBoolean()) {
        hasher = hasher.withSalt("lora-" + r.nextInt(100), r.nextBoolean() ? "ns" : null);
        hashSeed = hasher.seed();
      }
      int blocks = tokens.length / blockSize;
      long[] local = new long[blocks];
      long[] seq = new long[blocks];
      Arrays.fill(local, 0x5EED);
      Arrays.fill(seq, -1);
      hasher.hashes(tokens, local, seq);
      String what = "seed " + seed + " (blockSize " + blockSize + ", " + tokens.length + " tokens)";
      long[] expected = refLocal(tokens, blockSize, hashSeed);
      assertThat(local).as(what).isEqualTo(expected);
      assertThat(seq).as(what).isEqualTo(refSequence(expected));
      assertThat(local).as(what).isEqualTo(hasher.localHashes(tokens));
      assertThat(seq).as(what).isEqualTo(SequenceHasher.sequenceHashes(local));
    }
  }

  @Test
  void arraysOfTheWrongLengthAreRefused() {
    BlockHasher h = BlockHasher.of(4);
    int[] t = new int[10]; // two full blocks
    assertThatThrownBy(() -> h.hashes(t, new long[3], new long[2]))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("must hold 2 blocks, got 3 and 2");
    assertThatThrownBy(() -> h.hashes(t, new long[2], new long[1]))
        .isInstanceOf(IllegalArgumentException.class);
    long[] none = new long[0];
    h.hashes(new int[3], none, none); // no full block: nothing to write, no error
    assertThat(none).isEmpty();
  }
}
