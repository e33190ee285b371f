package io.kvrouter.hash;

import com.dynatrace.hash4j.hashing.Hasher64;
import com.dynatrace.hash4j.hashing.Hashing;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.IntBuffer;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Map;
import java.util.concurrent.atomic.AtomicReferenceArray;
import org.jspecify.annotations.Nullable;

/**
 * Computes the local block hashes of a token sequence: XXH3-64 over each full block of tokens as
 * 4-byte little-endian values, optionally followed by that block's multimodal hashes.
 *
 * <pre>
 * Implementation notes
 *
 * Immutable and thread-safe. The seed is 1337 plus the salts (DESIGN.md §2); a LoRA name or
 * namespace changes the seed, never the hashed bytes.
 *
 * Serialising: tokens go into a pooled scratch byte[] through its little-endian IntBuffer
 * view, whose bulk put(index, int[], off, len) is one memory copy on a little-endian machine
 * (a byte swap per int elsewhere: same bytes either way). Without multimodal hashes the whole
 * prompt is copied (in chunks of up to 8,192 tokens, or one block if longer) and each block is hashed in place with hash4j's one-shot XXH3
 * (hashBytesToLong(buf, offset, length)); with them, one block at a time is copied to the start
 * of the buffer and its sorted mm hashes appended after it. The only allocation is the result
 * array. hashes() also chains the sequence hashes in the same loop, block by block: the chain is
 * one dependent hash after another, and interleaved with the blocks' own hashes (independent of
 * each other) the processor runs both at once instead of one loop after the other.
 *
 * Scratch pool: 8 slots (each on its own cache line of an AtomicReferenceArray), a thread's slot
 * chosen by its id. A call takes its slot's scratch with getAndSet(null) and puts it back with
 * setRelease, so a scratch is used by one thread at a time; a call that finds its slot empty
 * (another thread of the same slot is hashing) or the scratch too short makes a new one, which
 * then replaces the slot's. Not a ThreadLocal, so that a virtual thread per request does not
 * allocate a scratch per request. At most 8 scratches of at most a chunk or a block stay alive.
 * </pre>
 */
public final class BlockHasher {
  /** The seed of every local block hash without salt (Dynamo's contract). */
  public static final long DEFAULT_SEED = 1337L;

  /** Tokens copied to the scratch at a time (more when one block is longer). */
  private static final int CHUNK_TOKENS = 8192;

  /** Pool slots (a power of two); each slot sits on a cache line of its own. */
  private static final int POOL_SLOTS = 8;

  private static final int SLOT_STRIDE = 16; // references: 64 bytes with compressed oops

  private static final AtomicReferenceArray<Scratch> POOL =
      new AtomicReferenceArray<>(POOL_SLOTS * SLOT_STRIDE);

  private final int blockSize;
  private final @Nullable String loraName;
  private final @Nullable String namespace;
  private final Hasher64 hasher;

  private BlockHasher(int blockSize, @Nullable String loraName, @Nullable String namespace) {
    this.blockSize = blockSize;
    this.loraName = loraName;
    this.namespace = namespace;
    this.hasher = Hashing.xxh3_64(seedFor(loraName, namespace));
  }

  /** A hasher for blocks of {@code blockSize} tokens, seed 1337 and no salt. */
  public static BlockHasher of(int blockSize) {
    if (blockSize < 1) {
      throw new IllegalArgumentException("blockSize must be >= 1, got " + blockSize);
    }
    return new BlockHasher(blockSize, null, null);
  }

  /** The same hasher salted with a LoRA adapter name; {@code null} or empty means none. */
  public BlockHasher withLora(@Nullable String loraName) {
    return new BlockHasher(blockSize, emptyToNull(loraName), namespace);
  }

  /** The same hasher salted with a cache namespace; {@code null} or empty means none. */
  public BlockHasher withNamespace(@Nullable String namespace) {
    return new BlockHasher(blockSize, loraName, emptyToNull(namespace));
  }

  /**
   * The same block size salted with exactly these two salts: {@code withLora(loraName)
   * .withNamespace(namespace)}, built in one step (each salt hashed once). {@code null} or empty
   * means none. For salts that arrive with each request, {@link SaltedHashers} keeps a bounded
   * cache of these.
   */
  public BlockHasher withSalt(@Nullable String loraName, @Nullable String namespace) {
    return new BlockHasher(blockSize, emptyToNull(loraName), emptyToNull(namespace));
  }

  /** Tokens per block. */
  public int blockSize() {
    return blockSize;
  }

  /** The XXH3 seed this hasher uses: 1337 plus the hashes of its salts. */
  public long seed() {
    return seedFor(loraName, namespace);
  }

  /** The local hash of every full block of {@code tokens}; a trailing partial block is dropped. */
  public long[] localHashes(int[] tokens) {
    return localHashes(tokens, Map.of());
  }

  /**
   * The local hash of every full block of {@code tokens[from..to)} (blocks start at {@code from}; a
   * trailing partial block is dropped): {@code localHashes(Arrays.copyOfRange(tokens, from, to))}
   * without the copy.
   */
  public long[] localHashes(int[] tokens, int from, int to) {
    if (tokens == null) {
      throw new IllegalArgumentException("tokens must not be null");
    }
    if (from < 0 || from > to || to > tokens.length) {
      throw new IllegalArgumentException(
          "range [" + from + ", " + to + ") is not within " + tokens.length + " tokens");
    }
    final long[] out = new long[(to - from) / blockSize];
    if (out.length > 0) hashBlocks(tokens, from, out);
    return out;
  }

  /**
   * The local hash of every full block of {@code tokens} into {@code local} and the blocks' §2
   * sequence hashes, with the default chain seed, into {@code seq} (a trailing partial block is
   * dropped): {@code localHashes(tokens)} and {@link SequenceHasher#sequenceHashes(long[])} of it,
   * in one pass, so that each link of the chain (a hash that waits for the one before) overlaps
   * with the next block's hash (which waits for nothing). Both arrays must be {@code tokens.length
   * / blockSize()} long; nothing else is allocated.
   *
   * @throws IllegalArgumentException when an array's length is not the number of full blocks
   */
  public void hashes(int[] tokens, long[] local, long[] seq) {
    if (tokens == null) {
      throw new IllegalArgumentException("tokens must not be null");
    }
    final int blocks = tokens.length / blockSize;
    if (local.length != blocks || seq.length != blocks) {
      throw new IllegalArgumentException(
          "local and seq must hold "
              + blocks
              + " blocks, got "
              + local.length
              + " and "
              + seq.length);
    }
    if (blocks == 0) return;
    final int size = blockSize;
    final Hasher64 h = hasher;
    final int chunkBlocks = Math.min(blocks, Math.max(1, CHUNK_TOKENS / size));
    final int slot = slot();
    final Scratch sc = borrow(slot, chunkBlocks * size);
    final byte[] buf = sc.bytes;
    final IntBuffer ints = sc.ints;
    final int blockBytes = size * 4;
    long prev = 0;
    for (int b = 0; b < blocks; ) {
      final int n = Math.min(chunkBlocks, blocks - b);
      ints.put(0, tokens, b * size, n * size);
      for (int k = 0, off = 0; k < n; k++, off += blockBytes) {
        final int i = b + k;
        final long l = h.hashBytesToLong(buf, off, blockBytes);
        local[i] = l;
        prev = i == 0 ? l : SequenceHasher.next(prev, l);
        seq[i] = prev;
      }
      b += n;
    }
    POOL.setRelease(slot, sc);
  }

  /**
   * The local hash of every full block of {@code tokens}, where the multimodal hashes of block
   * {@code i} (if any) are appended, sorted ascending as unsigned values, to that block's bytes.
   */
  public long[] localHashes(int[] tokens, Map<Integer, long[]> mmHashesByBlock) {
    if (tokens == null) {
      throw new IllegalArgumentException("tokens must not be null");
    }
    if (mmHashesByBlock == null) {
      throw new IllegalArgumentException("mmHashesByBlock must not be null (use Map.of())");
    }
    final int size = blockSize;
    final int blocks = tokens.length / size;
    final long[] out = new long[blocks];
    if (blocks == 0) {
      return out;
    }
    int maxExtra = 0;
    for (Map.Entry<Integer, long[]> e : mmHashesByBlock.entrySet()) {
      long[] mm = e.getValue();
      if (e.getKey() == null || mm == null) {
        throw new IllegalArgumentException("mmHashesByBlock must not hold null keys or values");
      }
      maxExtra = Math.max(maxExtra, mm.length);
    }
    final Hasher64 h = hasher;
    if (mmHashesByBlock.isEmpty()) {
      hashBlocks(tokens, 0, out);
      return out;
    }
    final int slot = slot();
    final Scratch sc = borrow(slot, size + maxExtra * 2);
    final byte[] buf = sc.bytes;
    final IntBuffer ints = sc.ints;
    for (int b = 0, t = 0; b < blocks; b++, t += size) {
      ints.put(0, tokens, t, size);
      int pos = size * 4;
      long[] mm = mmHashesByBlock.get(b);
      if (mm != null && mm.length > 0) {
        pos = appendSortedUnsigned(buf, pos, mm);
      }
      out[b] = h.hashBytesToLong(buf, 0, pos);
    }
    POOL.setRelease(slot, sc);
    return out;
  }

  /**
   * Hashes {@code out.length} full blocks of {@code tokens} from {@code from} into {@code out},
   * without multimodal hashes: blocks side by side, up to CHUNK_TOKENS at a time, one bulk copy per
   * chunk, then one XXH3 call per block on its part of the buffer.
   */
  private void hashBlocks(int[] tokens, int from, long[] out) {
    final int size = blockSize;
    final int blocks = out.length;
    final Hasher64 h = hasher;
    final int chunkBlocks = Math.min(blocks, Math.max(1, CHUNK_TOKENS / size));
    final int slot = slot();
    final Scratch sc = borrow(slot, chunkBlocks * size);
    final byte[] buf = sc.bytes;
    final IntBuffer ints = sc.ints;
    final int blockBytes = size * 4;
    for (int b = 0; b < blocks; ) {
      final int n = Math.min(chunkBlocks, blocks - b);
      ints.put(0, tokens, from + b * size, n * size);
      for (int k = 0, off = 0; k < n; k++, off += blockBytes) {
        out[b + k] = h.hashBytesToLong(buf, off, blockBytes);
      }
      b += n;
    }
    POOL.setRelease(slot, sc);
  }

  private static int appendSortedUnsigned(byte[] buf, int pos, long[] mm) {
    long[] sorted = mm.clone();
    // unsigned order: flip the sign bit, sort signed, flip back
    for (int i = 0; i < sorted.length; i++) sorted[i] ^= Long.MIN_VALUE;
    Arrays.sort(sorted);
    for (long s : sorted) {
      long v = s ^ Long.MIN_VALUE;
      for (int k = 0; k < 8; k++) {
        buf[pos++] = (byte) (v >>> (8 * k));
      }
    }
    return pos;
  }

  /** This thread's pool slot (threads spread by id; several threads may share one). */
  private static int slot() {
    return (int) (Thread.currentThread().threadId() & (POOL_SLOTS - 1)) * SLOT_STRIDE;
  }

  /**
   * Takes the scratch of {@code slot} out of the pool, or makes one when the slot is empty (its
   * scratch is in use by another thread) or too short; at least {@code ints} 4-byte values long.
   * The caller puts it back with {@code POOL.setRelease(slot, sc)} (an exception in between only
   * loses the scratch to the garbage collector).
   */
  private static Scratch borrow(int slot, int ints) {
    Scratch sc = POOL.getAndSet(slot, null);
    if (sc == null || sc.bytes.length < ints * 4) sc = new Scratch(Math.max(ints, 1024));
    return sc;
  }

  /** A byte array and its little-endian int view, so that tokens go in by bulk copy. */
  private static final class Scratch {
    final byte[] bytes;
    final IntBuffer ints;

    Scratch(int ints) {
      this.bytes = new byte[ints * 4];
      this.ints = ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN).asIntBuffer();
    }
  }

  private static long seedFor(@Nullable String loraName, @Nullable String namespace) {
    long seed = DEFAULT_SEED;
    if (loraName != null && !loraName.isEmpty()) {
      seed += Hashing.xxh3_64(0L).hashBytesToLong(loraName.getBytes(StandardCharsets.UTF_8));
    }
    if (namespace != null && !namespace.isEmpty()) {
      seed += Hashing.xxh3_64(1L).hashBytesToLong(namespace.getBytes(StandardCharsets.UTF_8));
    }
    return seed;
  }

  private static @Nullable String emptyToNull(@Nullable String s) {
    return s == null || s.isEmpty() ? null : s;
  }

  @Override
  public String toString() {
    return "BlockHasher[blockSize="
        + blockSize
        + (loraName != null ? ", lora=" + loraName : "")
        + (namespace != null ? ", namespace=" + namespace : "")
        + "]";
  }
}
