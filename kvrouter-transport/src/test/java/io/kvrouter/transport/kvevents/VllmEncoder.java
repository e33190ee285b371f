package io.kvrouter.transport.kvevents;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.math.BigInteger;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.msgpack.core.MessageBufferPacker;
import org.msgpack.core.MessagePack;

/**
 * Encodes {@link KvEventBatch}es the way vLLM and SGLang do with msgspec (test support): the batch
 * and its events each as a positional array ({@code array_like}) or as a tagged map, block hashes
 * as unsigned or signed 64-bit integers or as 32 raw bytes whose last 8 hold the value.
 */
public final class VllmEncoder {
  /** How block hashes go on the wire. */
  public enum HashStyle {
    /** msgpack uint64 for values of 2^63 and above (vLLM with int hashes). */
    UNSIGNED,
    /** msgpack int64 (SGLang). */
    SIGNED,
    /** 32 bytes, the value in the last 8 big-endian (vLLM's default sha256 hashes). */
    BYTES
  }

  private final boolean batchAsMap;
  private final boolean eventsAsMap;
  private final HashStyle hashStyle;
  private final String dpRankField;
  private final Random filler;

  /**
   * @param dpRankField the name of the rank in a map batch ({@code data_parallel_rank} or {@code
   *     attn_dp_rank})
   */
  public VllmEncoder(
      boolean batchAsMap, boolean eventsAsMap, HashStyle hashStyle, String dpRankField, long seed) {
    this.batchAsMap = batchAsMap;
    this.eventsAsMap = eventsAsMap;
    this.hashStyle = hashStyle;
    this.dpRankField = dpRankField;
    this.filler = new Random(seed);
  }

  /** The older positional form with unsigned hashes. */
  public static VllmEncoder arrayLike() {
    return new VllmEncoder(false, false, HashStyle.UNSIGNED, "data_parallel_rank", 1);
  }

  /** The newer tagged-map form (batch and events as maps) with raw-byte hashes. */
  public static VllmEncoder tagged() {
    return new VllmEncoder(true, true, HashStyle.BYTES, "data_parallel_rank", 1);
  }

  @Override
  public String toString() {
    return (batchAsMap ? "map" : "array")
        + " batch, "
        + (eventsAsMap ? "map" : "array")
        + " events, "
        + hashStyle
        + " hashes";
  }

  public byte[] encode(KvEventBatch batch) {
    try (MessageBufferPacker p = MessagePack.newDefaultBufferPacker()) {
      if (batchAsMap) {
        p.packMapHeader(batch.dpRank() == null ? 2 : 3);
        p.packString("ts").packDouble(batch.ts());
        p.packString("events");
        packEvents(p, batch.events());
        if (batch.dpRank() != null) {
          p.packString(dpRankField).packInt(batch.dpRank());
        }
      } else {
        p.packArrayHeader(batch.dpRank() == null ? 2 : 3);
        p.packDouble(batch.ts());
        packEvents(p, batch.events());
        if (batch.dpRank() != null) {
          p.packInt(batch.dpRank());
        }
      }
      return p.toByteArray();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  private void packEvents(MessageBufferPacker p, List<EngineEvent> events) throws IOException {
    p.packArrayHeader(events.size());
    for (EngineEvent e : events) {
      if (eventsAsMap) {
        packMapEvent(p, e);
      } else {
        packArrayEvent(p, e);
      }
    }
  }

  private void packArrayEvent(MessageBufferPacker p, EngineEvent e) throws IOException {
    List<Object> fields = new ArrayList<>();
    switch (e) {
      case EngineEvent.BlockStored s -> {
        fields.add("BlockStored");
        fields.add(new Hashes(s.blockHashes()));
        fields.add(s.hasParent() ? new Hash(s.parentBlockHash()) : null);
        fields.add(s.tokenIds());
        fields.add((long) s.blockSize());
        fields.add(s.loraId());
        fields.add(s.medium());
        fields.add(s.loraName());
        fields.add(s.extraKeys());
        fields.add(s.groupIdx() == null ? null : (long) s.groupIdx());
        fields.add(s.kvCacheSpecKind());
        fields.add(
            s.kvCacheSpecSlidingWindow() == null ? null : (long) s.kvCacheSpecSlidingWindow());
        trimTrailingNils(fields, 5);
      }
      case EngineEvent.BlockRemoved r -> {
        fields.add("BlockRemoved");
        fields.add(new Hashes(r.blockHashes()));
        fields.add(r.medium());
        fields.add(r.groupIdx() == null ? null : (long) r.groupIdx());
        trimTrailingNils(fields, 2); // vLLM's positional removal has no kind
      }
      case EngineEvent.AllBlocksCleared c -> fields.add("AllBlocksCleared");
    }
    p.packArrayHeader(fields.size());
    for (Object f : fields) pack(p, f);
  }

  private static void trimTrailingNils(List<Object> fields, int keep) {
    while (fields.size() > keep && fields.get(fields.size() - 1) == null) {
      fields.remove(fields.size() - 1);
    }
  }

  private void packMapEvent(MessageBufferPacker p, EngineEvent e) throws IOException {
    List<Object> kv = new ArrayList<>();
    switch (e) {
      case EngineEvent.BlockStored s -> {
        kv.add("type");
        kv.add("BlockStored");
        kv.add("block_hashes");
        kv.add(new Hashes(s.blockHashes()));
        kv.add("parent_block_hash");
        kv.add(s.hasParent() ? new Hash(s.parentBlockHash()) : null);
        kv.add("token_ids");
        kv.add(s.tokenIds());
        kv.add("block_size");
        kv.add((long) s.blockSize());
        kv.add("lora_id");
        kv.add(s.loraId());
        kv.add("medium");
        kv.add(s.medium());
        kv.add("lora_name");
        kv.add(s.loraName());
        if (s.extraKeys() != null) {
          kv.add("extra_keys");
          kv.add(s.extraKeys());
        }
        if (s.groupIdx() != null) {
          kv.add("group_idx");
          kv.add((long) s.groupIdx());
        }
        if (s.kvCacheSpecKind() != null) {
          kv.add("kv_cache_spec_kind");
          kv.add(s.kvCacheSpecKind());
        }
        if (s.kvCacheSpecSlidingWindow() != null) {
          kv.add("kv_cache_spec_sliding_window");
          kv.add((long) s.kvCacheSpecSlidingWindow());
        }
        if (s.cacheSalt() != null) {
          kv.add("cache_salt");
          kv.add(s.cacheSalt());
        }
      }
      case EngineEvent.BlockRemoved r -> {
        kv.add("type");
        kv.add("BlockRemoved");
        kv.add("block_hashes");
        kv.add(new Hashes(r.blockHashes()));
        kv.add("medium");
        kv.add(r.medium());
        if (r.groupIdx() != null) {
          kv.add("group_idx");
          kv.add((long) r.groupIdx());
        }
        if (r.kvCacheSpecKind() != null) {
          kv.add("kv_cache_spec_kind");
          kv.add(r.kvCacheSpecKind());
        }
      }
      case EngineEvent.AllBlocksCleared c -> {
        kv.add("type");
        kv.add("AllBlocksCleared");
      }
    }
    p.packMapHeader(kv.size() / 2);
    for (Object f : kv) pack(p, f);
  }

  private record Hash(long value) {}

  private record Hashes(long[] values) {}

  private void pack(MessageBufferPacker p, Object v) throws IOException {
    switch (v) {
      case null -> p.packNil();
      case Hash h -> packHash(p, h.value());
      case Hashes hs -> {
        p.packArrayHeader(hs.values().length);
        for (long h : hs.values()) packHash(p, h);
      }
      case int[] tokens -> {
        p.packArrayHeader(tokens.length);
        for (int t : tokens) p.packLong(Integer.toUnsignedLong(t));
      }
      case String s -> p.packString(s);
      case Long l -> p.packLong(l);
      case Integer i -> p.packLong(i);
      case Double d -> p.packDouble(d);
      case Boolean b -> p.packBoolean(b);
      case byte[] b -> {
        p.packBinaryHeader(b.length);
        p.writePayload(b);
      }
      case List<?> l -> {
        p.packArrayHeader(l.size());
        for (Object x : l) pack(p, x);
      }
      case Map<?, ?> m -> {
        p.packMapHeader(m.size());
        for (Map.Entry<?, ?> x : m.entrySet()) {
          pack(p, x.getKey());
          pack(p, x.getValue());
        }
      }
      default -> throw new IllegalArgumentException("cannot pack " + v.getClass());
    }
  }

  private void packHash(MessageBufferPacker p, long h) throws IOException {
    switch (hashStyle) {
      case UNSIGNED -> {
        if (h < 0) {
          p.packBigInteger(new BigInteger(Long.toUnsignedString(h)));
        } else {
          p.packLong(h);
        }
      }
      case SIGNED -> p.packLong(h);
      case BYTES -> {
        byte[] b = new byte[32];
        filler.nextBytes(b);
        for (int i = 0; i < 8; i++) b[24 + i] = (byte) (h >>> (8 * (7 - i)));
        p.packBinaryHeader(32);
        p.writePayload(b);
      }
    }
  }
}
