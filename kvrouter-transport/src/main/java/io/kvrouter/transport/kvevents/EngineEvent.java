package io.kvrouter.transport.kvevents;

import java.util.Arrays;
import java.util.List;
import java.util.Objects;
import org.jspecify.annotations.Nullable;

/**
 * One KV cache event as a vLLM or SGLang engine publishes it, decoded but not yet converted: {@code
 * BlockStored}, {@code BlockRemoved} or {@code AllBlocksCleared}.
 *
 * <p>Block hashes are the engine's own 64-bit hashes held as {@code long} bits, whether they came
 * as unsigned, signed or raw-byte values on the wire. Arrays are taken over, not copied: callers
 * must not change them. Optional fields are {@code null} when absent or nil.
 */
public sealed interface EngineEvent {

  /**
   * The engine stored a chain of blocks under the block {@code parentBlockHash} (when {@code
   * hasParent}) or at the root.
   *
   * @param blockHashes the engine's hash of each stored block, in chain order
   * @param hasParent whether the chain hangs under a parent block
   * @param parentBlockHash the parent's engine hash (0 when {@code !hasParent})
   * @param tokenIds the tokens of the stored blocks, {@code blockSize} per block
   * @param blockSize the engine's tokens per block
   * @param loraId the numeric LoRA adapter id (older engines), or null
   * @param medium where the blocks live ({@code "GPU"}, {@code "CPU"}, ...), or null
   * @param loraName the LoRA adapter name, or null
   * @param extraKeys per block, the extra values the engine mixed into that block's hash (LoRA
   *     name, multimodal identifiers, cache salt, ...), each entry null or a list of decoded
   *     msgpack values ({@code String}, {@code Long}, {@code Double}, {@code Boolean}, {@code
   *     byte[]}, {@code List}, {@code Map}, null); null when absent
   * @param groupIdx the KV cache group of a hybrid model, or null
   * @param kvCacheSpecKind the kind of that group ({@code "full_attention"}, ...), or null
   * @param kvCacheSpecSlidingWindow that group's sliding window in tokens ({@code
   *     kv_cache_spec_sliding_window}), or null
   * @param cacheSalt an explicit {@code cache_salt} field (map form only), or null
   */
  record BlockStored(
      long[] blockHashes,
      boolean hasParent,
      long parentBlockHash,
      int[] tokenIds,
      int blockSize,
      @Nullable Long loraId,
      @Nullable String medium,
      @Nullable String loraName,
      @Nullable List<@Nullable List<@Nullable Object>> extraKeys,
      @Nullable Integer groupIdx,
      @Nullable String kvCacheSpecKind,
      @Nullable Integer kvCacheSpecSlidingWindow,
      @Nullable String cacheSalt)
      implements EngineEvent {
    public BlockStored {
      Objects.requireNonNull(blockHashes, "blockHashes");
      Objects.requireNonNull(tokenIds, "tokenIds");
      if (!hasParent && parentBlockHash != 0L) {
        throw new IllegalArgumentException("a root store carries no parent hash");
      }
    }

    /** A store without a sliding window (every field but {@code kv_cache_spec_sliding_window}). */
    public BlockStored(
        long[] blockHashes,
        boolean hasParent,
        long parentBlockHash,
        int[] tokenIds,
        int blockSize,
        @Nullable Long loraId,
        @Nullable String medium,
        @Nullable String loraName,
        @Nullable List<@Nullable List<@Nullable Object>> extraKeys,
        @Nullable Integer groupIdx,
        @Nullable String kvCacheSpecKind,
        @Nullable String cacheSalt) {
      this(
          blockHashes,
          hasParent,
          parentBlockHash,
          tokenIds,
          blockSize,
          loraId,
          medium,
          loraName,
          extraKeys,
          groupIdx,
          kvCacheSpecKind,
          null,
          cacheSalt);
    }

    /** A store with only the fields every engine sends. */
    public static BlockStored of(
        long[] blockHashes, @Nullable Long parentBlockHash, int[] tokenIds, int blockSize) {
      return new BlockStored(
          blockHashes,
          parentBlockHash != null,
          parentBlockHash == null ? 0L : parentBlockHash,
          tokenIds,
          blockSize,
          null,
          null,
          null,
          null,
          null,
          null,
          null);
    }

    @Override
    public boolean equals(@Nullable Object o) {
      return o instanceof BlockStored s
          && hasParent == s.hasParent
          && parentBlockHash == s.parentBlockHash
          && blockSize == s.blockSize
          && Arrays.equals(blockHashes, s.blockHashes)
          && Arrays.equals(tokenIds, s.tokenIds)
          && Objects.equals(loraId, s.loraId)
          && Objects.equals(medium, s.medium)
          && Objects.equals(loraName, s.loraName)
          && ExtraKeys.deepEquals(extraKeys, s.extraKeys)
          && Objects.equals(groupIdx, s.groupIdx)
          && Objects.equals(kvCacheSpecKind, s.kvCacheSpecKind)
          && Objects.equals(kvCacheSpecSlidingWindow, s.kvCacheSpecSlidingWindow)
          && Objects.equals(cacheSalt, s.cacheSalt);
    }

    @Override
    public int hashCode() {
      return Objects.hash(
              hasParent, parentBlockHash, blockSize, loraId, medium, loraName, groupIdx, cacheSalt)
          + 31 * Arrays.hashCode(blockHashes)
          + 17 * Arrays.hashCode(tokenIds);
    }

    @Override
    public String toString() {
      StringBuilder sb = new StringBuilder("BlockStored[hashes=");
      appendHashes(sb, blockHashes);
      sb.append(", parent=")
          .append(hasParent ? Long.toUnsignedString(parentBlockHash) : "none")
          .append(", tokens=")
          .append(tokenIds.length)
          .append(", blockSize=")
          .append(blockSize);
      if (loraId != null) sb.append(", loraId=").append(loraId);
      if (medium != null) sb.append(", medium=").append(medium);
      if (loraName != null) sb.append(", loraName=").append(loraName);
      if (extraKeys != null) sb.append(", extraKeys=").append(ExtraKeys.toString(extraKeys));
      if (groupIdx != null) sb.append(", groupIdx=").append(groupIdx);
      if (kvCacheSpecKind != null) sb.append(", kind=").append(kvCacheSpecKind);
      if (kvCacheSpecSlidingWindow != null) sb.append(", window=").append(kvCacheSpecSlidingWindow);
      if (cacheSalt != null) sb.append(", cacheSalt=").append(cacheSalt);
      return sb.append(']').toString();
    }
  }

  /**
   * The engine evicted these blocks.
   *
   * @param blockHashes the engine's hashes of the evicted blocks
   * @param medium where the blocks lived, or null
   * @param groupIdx the KV cache group of a hybrid model, or null
   * @param kvCacheSpecKind the kind of that group, or null (vLLM sends it on stores only; a
   *     map-form removal may carry it)
   */
  record BlockRemoved(
      long[] blockHashes,
      @Nullable String medium,
      @Nullable Integer groupIdx,
      @Nullable String kvCacheSpecKind)
      implements EngineEvent {
    public BlockRemoved {
      Objects.requireNonNull(blockHashes, "blockHashes");
    }

    /** A removal with only the block hashes. */
    public static BlockRemoved of(long... blockHashes) {
      return new BlockRemoved(blockHashes, null, null, null);
    }

    @Override
    public boolean equals(@Nullable Object o) {
      return o instanceof BlockRemoved r
          && Arrays.equals(blockHashes, r.blockHashes)
          && Objects.equals(medium, r.medium)
          && Objects.equals(groupIdx, r.groupIdx)
          && Objects.equals(kvCacheSpecKind, r.kvCacheSpecKind);
    }

    @Override
    public int hashCode() {
      return Arrays.hashCode(blockHashes) * 31 + Objects.hash(medium, groupIdx, kvCacheSpecKind);
    }

    @Override
    public String toString() {
      StringBuilder sb = new StringBuilder("BlockRemoved[hashes=");
      appendHashes(sb, blockHashes);
      if (medium != null) sb.append(", medium=").append(medium);
      if (groupIdx != null) sb.append(", groupIdx=").append(groupIdx);
      if (kvCacheSpecKind != null) sb.append(", kind=").append(kvCacheSpecKind);
      return sb.append(']').toString();
    }
  }

  /** The engine dropped every cached block. */
  record AllBlocksCleared() implements EngineEvent {}

  private static void appendHashes(StringBuilder sb, long[] hashes) {
    sb.append('[');
    for (int i = 0; i < hashes.length; i++) {
      if (i > 0) sb.append(", ");
      sb.append(Long.toUnsignedString(hashes[i]));
    }
    sb.append(']');
  }
}
