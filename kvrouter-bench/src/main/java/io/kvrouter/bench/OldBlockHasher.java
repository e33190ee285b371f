package io.kvrouter.bench;

import com.dynatrace.hash4j.hashing.Hasher64;
import com.dynatrace.hash4j.hashing.Hashing;

/**
 * A copy of {@code BlockHasher.localHashes(int[])} as it was before issue 21 (tokens written into
 * the scratch buffer one byte at a time), unsalted, so that {@link HashingBenchmark} can time the
 * old and the new serialisation side by side in one run. Same hashes as {@code BlockHasher}; not
 * used by anything but the benchmark.
 */
final class OldBlockHasher {
  private static final ThreadLocal<byte[]> SCRATCH = ThreadLocal.withInitial(() -> new byte[0]);

  private final int blockSize;
  private final Hasher64 hasher = Hashing.xxh3_64(1337L);

  OldBlockHasher(int blockSize) {
    this.blockSize = blockSize;
  }

  long[] localHashes(int[] tokens) {
    final int size = blockSize;
    final int blocks = tokens.length / size;
    final long[] out = new long[blocks];
    if (blocks == 0) {
      return out;
    }
    final byte[] buf = scratch(size * 4);
    final Hasher64 h = hasher;
    for (int b = 0, t = 0; b < blocks; b++) {
      int pos = 0;
      for (int end = t + size; t < end; t++) {
        int v = tokens[t];
        buf[pos] = (byte) v;
        buf[pos + 1] = (byte) (v >>> 8);
        buf[pos + 2] = (byte) (v >>> 16);
        buf[pos + 3] = (byte) (v >>> 24);
        pos += 4;
      }
      out[b] = h.hashBytesToLong(buf, 0, pos);
    }
    return out;
  }

  private static byte[] scratch(int length) {
    byte[] buf = SCRATCH.get();
    if (buf.length < length) {
      buf = new byte[Math.max(length, 256)];
      SCRATCH.set(buf);
    }
    return buf;
  }
}
