package io.kvrouter.event;

import java.util.Arrays;

/**
 * What a worker rank did to its prefix cache: stored a chain of blocks, removed blocks, or cleared
 * everything.
 *
 * <p>Arrays passed to the factories are taken over, not copied (events are built once per message
 * on the ingestion path): the caller must not change them afterwards. Hashes are unsigned 64-bit
 * values held as {@code long} bits.
 */
public sealed interface CacheEvent {

  /** A chain of blocks stored under the block whose sequence hash is {@code parentHash}. */
  static CacheEvent stored(long parentHash, long[] blockHashes, long[] tokensHashes) {
    return new Stored(true, parentHash, blockHashes, tokensHashes);
  }

  /** A chain of blocks stored at position 0 (no parent). */
  static CacheEvent storedAtRoot(long[] blockHashes, long[] tokensHashes) {
    return new Stored(false, 0L, blockHashes, tokensHashes);
  }

  /** Blocks evicted, named by their sequence hashes. */
  static CacheEvent removed(long... blockHashes) {
    return new Removed(blockHashes);
  }

  /** The publisher dropped its whole cache. */
  static CacheEvent cleared() {
    return Cleared.INSTANCE;
  }

  /**
   * Blocks stored as a chain: {@code blockHashes[i]} is block i's sequence hash and {@code
   * tokensHashes[i]} its local hash; block 0 hangs under {@code parentHash} when {@code hasParent},
   * else at the root.
   */
  record Stored(boolean hasParent, long parentHash, long[] blockHashes, long[] tokensHashes)
      implements CacheEvent {
    public Stored {
      if (blockHashes == null || tokensHashes == null) {
        throw new IllegalArgumentException("stored: blockHashes and tokensHashes must not be null");
      }
      if (blockHashes.length == 0) {
        throw new IllegalArgumentException("stored: at least one block is required");
      }
      if (blockHashes.length != tokensHashes.length) {
        throw new IllegalArgumentException(
            "stored: "
                + blockHashes.length
                + " block hashes but "
                + tokensHashes.length
                + " tokens hashes; they must be equal in length");
      }
      if (!hasParent && parentHash != 0L) {
        throw new IllegalArgumentException("stored: a root store carries no parent hash");
      }
    }

    /** Number of blocks in the chain. */
    public int length() {
      return blockHashes.length;
    }

    @Override
    public boolean equals(Object o) {
      return o instanceof Stored s
          && hasParent == s.hasParent
          && parentHash == s.parentHash
          && Arrays.equals(blockHashes, s.blockHashes)
          && Arrays.equals(tokensHashes, s.tokensHashes);
    }

    @Override
    public int hashCode() {
      return Boolean.hashCode(hasParent) * 31
          + Long.hashCode(parentHash) * 17
          + Arrays.hashCode(blockHashes) * 7
          + Arrays.hashCode(tokensHashes);
    }

    @Override
    public String toString() {
      StringBuilder sb = new StringBuilder("Stored[parent=");
      sb.append(hasParent ? Long.toUnsignedString(parentHash) : "root").append(", blocks=[");
      for (int i = 0; i < blockHashes.length; i++) {
        if (i > 0) sb.append(", ");
        sb.append(Long.toUnsignedString(blockHashes[i]))
            .append('/')
            .append(Long.toUnsignedString(tokensHashes[i]));
      }
      return sb.append("]]").toString();
    }
  }

  /** Blocks evicted, by sequence hash. */
  record Removed(long[] blockHashes) implements CacheEvent {
    public Removed {
      if (blockHashes == null) {
        throw new IllegalArgumentException("removed: blockHashes must not be null");
      }
    }

    @Override
    public boolean equals(Object o) {
      return o instanceof Removed r && Arrays.equals(blockHashes, r.blockHashes);
    }

    @Override
    public int hashCode() {
      return Arrays.hashCode(blockHashes);
    }

    @Override
    public String toString() {
      StringBuilder sb = new StringBuilder("Removed[");
      for (int i = 0; i < blockHashes.length; i++) {
        if (i > 0) sb.append(", ");
        sb.append(Long.toUnsignedString(blockHashes[i]));
      }
      return sb.append(']').toString();
    }
  }

  /** Every block of the publishing rank is gone. */
  enum Cleared implements CacheEvent {
    INSTANCE;

    @Override
    public String toString() {
      return "Cleared";
    }
  }
}
