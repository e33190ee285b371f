package io.kvrouter.transport.kvevents;

import static java.util.Objects.requireNonNull;

import io.kvrouter.transport.TokenIds;
import java.io.IOException;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.jspecify.annotations.Nullable;
import org.msgpack.core.MessageFormat;
import org.msgpack.core.MessageInsufficientBufferException;
import org.msgpack.core.MessageNeverUsedFormatException;
import org.msgpack.core.MessagePack;
import org.msgpack.core.MessagePackException;
import org.msgpack.core.MessageUnpacker;
import org.msgpack.value.ValueType;

/** A one-shot decoder of one {@code KVEventBatch} payload. */
final class BatchReader {
  /*
   * Implementation notes
   *
   * One instance per payload, used by one thread, then dropped. Recursive descent over a
   * msgpack-core MessageUnpacker that reads the caller's array in place:
   *
   *   batch  := [ts, events, dp_rank?, ignored...]
   *           | {"ts": num, "events": events, "data_parallel_rank"|"attn_dp_rank"|"dp_rank": int|nil,
   *              ignored...}
   *   events := [event...]
   *   event  := ["BlockStored", hashes, hash|nil, [u32...], int, lora_id?, medium?, lora_name?,
   *              extra_keys?, group_idx?, kind?, sliding_window?, ignored...]
   *              (lora_name may be SGLang's metadata map {"cache_salt": str, ignored...})
   *           | ["BlockRemoved", hashes, medium?, group_idx?, ignored...]
   *           | ["AllBlocksCleared", ignored...] | [unknown-tag, ignored...]
   *           | {"type": tag, field: value...}   (same field names; "type" may come anywhere,
   *                                              but when it comes first an unknown tag skips
   *                                              the rest unread)
   *   hash   := integer (u64 or i64, kept as 64 bits) | bin (last 8 bytes, big-endian)
   *
   * Every read method is entered with the unpacker before the value and returns after it.
   * Where we are is kept in a small path stack (names[], indexes[], depth) that only becomes a
   * string when something is wrong. Array and map headers are checked against the bytes left
   * (every msgpack value takes at least one byte) before anything is allocated for them, so a
   * forged header cannot make us allocate more than the payload's size. Values we ignore are
   * skipped by skip(), which checks container headers the same way (msgpack-core's own
   * skipValue(int) overflows its int count on forged headers; found by KvEventDecoderFuzzTest). Generic values (extra
   * keys, ignored fields) nest at most MAX_DEPTH levels.
   *
   * One reader per field: an event's fields are read by Fields.read(field id) whether they come
   * by position (STORED_ORDER, REMOVED_ORDER) or by name (fieldId). One reader per integer:
   * integerBits() gives every msgpack integer as 64 bits, a uint64 as its bit pattern read from
   * its raw bytes (no BigInteger); callers check ranges on that (a uint64 with the top bit set is
   * "too big" for every bounded field, token ids use TokenIds like the HTTP bodies).
   *
   * msgpack-core's own exceptions are translated at the top: running out of bytes is
   * "truncated", the byte 0xc1 is "not msgpack"; both carry the path reached so far.
   */

  private static final int MAX_DEPTH = 32;

  private final MessageUnpacker in;
  private final int length;

  private static final VarHandle BIG_ENDIAN_LONG =
      MethodHandles.byteArrayViewVarHandle(long[].class, ByteOrder.BIG_ENDIAN);

  private byte @Nullable [] u64; // the raw bytes of a uint64, allocated at the first one

  private @Nullable String[] names = new @Nullable String[8]; // null: a level without a name
  private int[] indexes = new int[8];
  private int depth;

  BatchReader(byte[] payload, int offset, int length) {
    this.in = MessagePack.newDefaultUnpacker(payload, offset, length);
    this.length = length;
  }

  KvEventBatch read() {
    try {
      if (!in.hasNext()) {
        throw error("expected an event batch (an array or a map), found an empty payload");
      }
      KvEventBatch batch = readBatch();
      if (in.hasNext()) {
        depth = 0;
        throw error(
            "expected the end of the payload after the batch, found "
                + (length - in.getTotalReadBytes())
                + " more bytes");
      }
      return batch;
    } catch (MessageInsufficientBufferException e) {
      throw error("the payload ends in the middle of a value (truncated)", e);
    } catch (MessageNeverUsedFormatException e) {
      throw error("not msgpack: found the byte 0xc1, which msgpack never uses", e);
    } catch (MessagePackException e) {
      throw error("not valid msgpack: " + e.getMessage(), e);
    } catch (IOException e) {
      // the input is an in-memory array; msgpack-core declares IOException all the same
      throw error("could not read the payload: " + e, e);
    }
  }

  // ---------------------------------------------------------------- batch

  private KvEventBatch readBatch() throws IOException {
    ValueType t = nextFormat().getValueType();
    if (t == ValueType.ARRAY) {
      int n = arrayHeader();
      if (n < 2) {
        throw error(
            "a batch array holds ts, events and an optional data_parallel_rank; found "
                + n
                + (n == 1 ? " element" : " elements"));
      }
      push("ts");
      double ts = readTs();
      rename("events");
      EventList events = readEvents();
      Integer dp = null;
      if (n >= 3) {
        rename("data_parallel_rank");
        dp = readDpRank();
      }
      pop();
      skip(n - Math.min(n, 3));
      return new KvEventBatch(ts, dp, events.events, events.skipped);
    }
    if (t == ValueType.MAP) {
      int n = mapHeader();
      boolean hasTs = false;
      double ts = 0;
      EventList events = null;
      Integer dp = null;
      String dpField = null;
      push(null);
      for (int i = 0; i < n; i++) {
        String key = fieldName();
        rename(key);
        switch (key) {
          case "ts" -> {
            if (hasTs) throw error("duplicate field");
            ts = readTs();
            hasTs = true;
          }
          case "events" -> {
            if (events != null) throw error("duplicate field");
            events = readEvents();
          }
          case "data_parallel_rank", "attn_dp_rank", "dp_rank" -> {
            Integer r = readDpRank();
            if (dpField != null) {
              if (dpField.equals(key)) throw error("duplicate field");
              if (r != null && dp != null && !r.equals(dp)) {
                throw error(
                    "rank "
                        + r
                        + " contradicts "
                        + dpField
                        + " "
                        + dp
                        + " (give one, or the same)");
              }
            }
            if (r != null) dp = r;
            dpField = key;
          }
          default -> skip(1);
        }
      }
      pop();
      if (!hasTs) throw missing("ts");
      if (events == null) throw missing("events");
      return new KvEventBatch(ts, dp, events.events, events.skipped);
    }
    throw error("expected an event batch (an array or a map), found " + describeNext());
  }

  private double readTs() throws IOException {
    MessageFormat f = nextFormat();
    return switch (f.getValueType()) {
      case FLOAT -> in.unpackDouble();
      case INTEGER ->
          f == MessageFormat.UINT64 ? unsignedToDouble(integerBits(f)) : in.unpackLong();
      default -> throw error("expected a timestamp (a number), found " + describeNext());
    };
  }

  /** The unsigned 64-bit value {@code bits} as the nearest double (as BigInteger's would be). */
  static double unsignedToDouble(long bits) {
    if (bits >= 0) return bits;
    // halve with the lowest bit kept sticky so that rounding to 53 bits stays correct, then double
    return (double) ((bits >>> 1) | (bits & 1)) * 2.0;
  }

  private @Nullable Integer readDpRank() throws IOException {
    if (in.tryUnpackNil()) {
      return null;
    }
    return (int) readInteger(0, Integer.MAX_VALUE, "a data-parallel rank (an integer >= 0)");
  }

  private record EventList(List<EngineEvent> events, int skipped) {}

  private EventList readEvents() throws IOException {
    if (nextFormat().getValueType() != ValueType.ARRAY) {
      throw error("expected an array of events, found " + describeNext());
    }
    int n = arrayHeader();
    List<EngineEvent> out = new ArrayList<>(n);
    int skipped = 0;
    for (int i = 0; i < n; i++) {
      index(i);
      EngineEvent e = readEvent();
      if (e == null) {
        skipped++;
      } else {
        out.add(e);
      }
    }
    index(-1);
    return new EventList(out, skipped);
  }

  // ---------------------------------------------------------------- events

  /** One event, or {@code null} for an event of an unknown type (skipped whole). */
  private @Nullable EngineEvent readEvent() throws IOException {
    ValueType t = nextFormat().getValueType();
    if (t == ValueType.ARRAY) {
      int n = arrayHeader();
      if (n == 0) {
        throw error("an event array starts with its type tag; found an empty array");
      }
      push("type");
      String tag = readTag();
      pop();
      return switch (tag) {
        case "BlockStored" -> readStoredArray(n - 1);
        case "BlockRemoved" -> readRemovedArray(n - 1);
        case "AllBlocksCleared" -> {
          skip(n - 1);
          yield new EngineEvent.AllBlocksCleared();
        }
        default -> {
          skip(n - 1);
          yield null;
        }
      };
    }
    if (t == ValueType.MAP) {
      return readEventMap(mapHeader());
    }
    throw error(
        "expected an event (an array that starts with its type tag, or a map with \"type\"), found "
            + describeNext());
  }

  private String readTag() throws IOException {
    if (nextFormat().getValueType() != ValueType.STRING) {
      throw error("expected the event type (a string), found " + describeNext());
    }
    return in.unpackString();
  }

  // Field ids: bit i of Fields.seen. STORED_ORDER and REMOVED_ORDER are the positional forms'
  // field orders (vLLM's msgspec array_like); the map form names the same fields (FIELD_NAMES),
  // plus cache_salt.
  private static final int BLOCK_HASHES = 0;
  private static final int PARENT = 1;
  private static final int TOKEN_IDS = 2;
  private static final int BLOCK_SIZE = 3;
  private static final int LORA_ID = 4;
  private static final int MEDIUM = 5;
  private static final int LORA_NAME = 6;
  private static final int EXTRA_KEYS = 7;
  private static final int GROUP_IDX = 8;
  private static final int KIND = 9;
  private static final int CACHE_SALT = 10;
  private static final int LOCALITY = 11;
  private static final int SLIDING_WINDOW = 12;

  private static final String[] FIELD_NAMES = {
    "block_hashes",
    "parent_block_hash",
    "token_ids",
    "block_size",
    "lora_id",
    "medium",
    "lora_name",
    "extra_keys",
    "group_idx",
    "kv_cache_spec_kind",
    "cache_salt",
    "locality",
    "kv_cache_spec_sliding_window"
  };

  /** BlockStored's positions (docs/ingestion.md, "Hybrid models"); the first four are required. */
  private static final int[] STORED_ORDER = {
    BLOCK_HASHES,
    PARENT,
    TOKEN_IDS,
    BLOCK_SIZE,
    LORA_ID,
    MEDIUM,
    LORA_NAME,
    EXTRA_KEYS,
    GROUP_IDX,
    KIND,
    SLIDING_WINDOW
  };

  /**
   * BlockRemoved's positions; the first is required. vLLM's removal carries no kind (its group is
   * named by group_idx alone), so a fifth position is skipped whatever it holds.
   */
  private static final int[] REMOVED_ORDER = {BLOCK_HASHES, MEDIUM, GROUP_IDX};

  /** The id of a map field name, or -1 for a field to skip. */
  private static int fieldId(String key) {
    return switch (key) {
      case "block_hashes" -> BLOCK_HASHES;
      case "parent_block_hash" -> PARENT;
      case "token_ids" -> TOKEN_IDS;
      case "block_size" -> BLOCK_SIZE;
      case "lora_id" -> LORA_ID;
      case "medium" -> MEDIUM;
      case "lora_name" -> LORA_NAME;
      case "extra_keys" -> EXTRA_KEYS;
      case "group_idx" -> GROUP_IDX;
      case "kv_cache_spec_kind" -> KIND;
      case "cache_salt" -> CACHE_SALT;
      case "locality" -> LOCALITY;
      case "kv_cache_spec_sliding_window" -> SLIDING_WINDOW;
      default -> -1;
    };
  }

  private EngineEvent readStoredArray(int fields) throws IOException {
    if (fields < 4) {
      throw error(
          "BlockStored needs block_hashes, parent_block_hash, token_ids and block_size; found only "
              + fields
              + (fields == 1 ? " field" : " fields"));
    }
    return readPositional(fields, STORED_ORDER).stored();
  }

  private EngineEvent readRemovedArray(int fields) throws IOException {
    if (fields < 1) {
      throw error("BlockRemoved needs block_hashes; found no fields");
    }
    return readPositional(fields, REMOVED_ORDER).removed();
  }

  /** The fields of an event array after its tag: the known positions, then the rest skipped. */
  private Fields readPositional(int fields, int[] order) throws IOException {
    Fields f = new Fields();
    int known = Math.min(fields, order.length);
    push(null);
    for (int i = 0; i < known; i++) {
      rename(FIELD_NAMES[order[i]]);
      f.read(order[i]);
    }
    pop();
    skip(fields - known); // positions newer than this decoder
    return f;
  }

  private @Nullable EngineEvent readEventMap(int n) throws IOException {
    Fields f = new Fields();
    String tag = null;
    push(null);
    for (int i = 0; i < n; i++) {
      String key = fieldName();
      rename(key);
      if (key.equals("type")) {
        if (tag != null) throw error("duplicate field");
        tag = readTag();
        if (i == 0 && !isKnownType(tag)) {
          // msgspec writes the tag first: skip an unknown event without looking into it
          skip(2L * (n - 1));
          pop();
          return null;
        }
        continue;
      }
      int id = fieldId(key);
      if (id < 0) {
        skip(1);
      } else {
        f.read(id);
      }
    }
    if (tag == null) {
      throw missingHere("type");
    }
    EngineEvent e =
        switch (tag) {
          case "BlockStored" -> {
            requireField(f.blockHashes != null, "block_hashes");
            requireField(f.tokenIds != null, "token_ids");
            requireField((f.seen & (1 << BLOCK_SIZE)) != 0, "block_size");
            yield f.remote() ? null : f.stored();
          }
          case "BlockRemoved" -> {
            requireField(f.blockHashes != null, "block_hashes");
            yield f.remote() ? null : f.removed();
          }
          case "AllBlocksCleared" -> new EngineEvent.AllBlocksCleared();
          default -> null;
        };
    pop();
    return e;
  }

  private static boolean isKnownType(String tag) {
    return tag.equals("BlockStored")
        || tag.equals("BlockRemoved")
        || tag.equals("AllBlocksCleared");
  }

  /** The fields of one event, filled in whatever order they come. */
  private final class Fields {
    // null: not read (yet), or nil on the wire
    long @Nullable [] blockHashes;
    boolean hasParent;
    long parent;
    int @Nullable [] tokenIds;
    int blockSize;
    @Nullable Long loraId;
    @Nullable String medium;
    @Nullable String loraName;
    @Nullable List<@Nullable List<@Nullable Object>> extraKeys;
    @Nullable Integer groupIdx;
    @Nullable String kind;
    @Nullable String cacheSalt;
    @Nullable String locality;
    @Nullable Integer slidingWindow;
    int seen;

    /** Reads the value of field {@code id}: the one reader of every field, both forms. */
    void read(int id) throws IOException {
      int bit = 1 << id;
      if ((seen & bit) != 0) {
        throw error("duplicate field");
      }
      seen |= bit;
      switch (id) {
        case BLOCK_HASHES -> blockHashes = readHashes();
        case PARENT -> {
          hasParent = !in.tryUnpackNil();
          parent = hasParent ? readHash() : 0L;
        }
        case TOKEN_IDS -> tokenIds = readTokens();
        case BLOCK_SIZE -> blockSize = readBlockSize();
        case LORA_ID -> loraId = readOptionalLong();
        case MEDIUM -> medium = readOptionalString();
        case LORA_NAME -> {
          if (nextFormat().getValueType() == ValueType.MAP) {
            readMetadata();
          } else {
            loraName = readOptionalString();
          }
        }
        case EXTRA_KEYS -> extraKeys = readExtraKeys();
        case GROUP_IDX -> groupIdx = readOptionalGroup();
        case KIND -> kind = readOptionalString();
        case CACHE_SALT -> cacheSalt = readOptionalString();
        case LOCALITY -> locality = readOptionalString();
        case SLIDING_WINDOW -> slidingWindow = readOptionalWindow();
        default -> throw new IllegalStateException("field " + id);
      }
    }

    /**
     * SGLang's {@code BlockStoredWithMetadata} (positional, for salted requests) puts a map {@code
     * {"cache_salt": s}} right after {@code medium}, where vLLM has {@code lora_name}: its salt is
     * read, other keys are skipped.
     */
    void readMetadata() throws IOException {
      int n = mapHeader();
      push(null);
      for (int i = 0; i < n; i++) {
        String key = fieldName();
        rename(key);
        if (key.equals("cache_salt")) {
          int bit = 1 << CACHE_SALT;
          if ((seen & bit) != 0) {
            throw error("duplicate field");
          }
          seen |= bit;
          cacheSalt = readOptionalString();
        } else {
          skip(1);
        }
      }
      pop();
    }

    /**
     * Whether the event is about a copy on another node ({@code locality} {@code "REMOTE"}, vLLM
     * 0.26+): not this worker's cache, so it is skipped as Dynamo does.
     */
    boolean remote() {
      return locality != null && locality.equalsIgnoreCase("REMOTE");
    }

    /** The store read; block_hashes and token_ids were read (required: the callers check). */
    EngineEvent.BlockStored stored() {
      return new EngineEvent.BlockStored(
          requireNonNull(blockHashes, "blockHashes"),
          hasParent,
          parent,
          requireNonNull(tokenIds, "tokenIds"),
          blockSize,
          loraId,
          medium,
          loraName,
          extraKeys,
          groupIdx,
          kind,
          slidingWindow,
          cacheSalt);
    }

    /** The removal read; block_hashes was read (required: the callers check). */
    EngineEvent.BlockRemoved removed() {
      return new EngineEvent.BlockRemoved(
          requireNonNull(blockHashes, "blockHashes"), medium, groupIdx, kind);
    }
  }

  // ---------------------------------------------------------------- fields

  private long[] readHashes() throws IOException {
    if (nextFormat().getValueType() != ValueType.ARRAY) {
      throw error("expected an array of block hashes, found " + describeNext());
    }
    int n = arrayHeader();
    long[] out = new long[n];
    for (int i = 0; i < n; i++) {
      index(i);
      out[i] = readHash();
    }
    index(-1);
    return out;
  }

  private long readHash() throws IOException {
    MessageFormat f = nextFormat();
    switch (f.getValueType()) {
      case INTEGER -> {
        return integerBits(f);
      }
      case BINARY -> {
        int n = in.unpackBinaryHeader();
        checkRemaining(n, 1, "bytes");
        if (n == 0) {
          throw error("expected a block hash, found an empty byte string");
        }
        byte[] b = in.readPayload(n);
        long v = 0;
        for (int i = Math.max(0, n - 8); i < n; i++) {
          v = (v << 8) | (b[i] & 0xff);
        }
        return v;
      }
      default ->
          throw error("expected a block hash (an integer or bytes), found " + describeNext());
    }
  }

  private int[] readTokens() throws IOException {
    if (nextFormat().getValueType() != ValueType.ARRAY) {
      throw error("expected an array of token ids, found " + describeNext());
    }
    int n = arrayHeader();
    int[] out = new int[n];
    for (int i = 0; i < n; i++) {
      index(i);
      out[i] = readTokenId();
    }
    index(-1);
    return out;
  }

  /** One token id, {@code 0..2^32-1} as int bits ({@link TokenIds}, the same check as HTTP's). */
  private int readTokenId() throws IOException {
    MessageFormat f = nextFormat();
    if (f.getValueType() != ValueType.INTEGER) {
      throw error("expected a token id in " + TokenIds.RANGE + ", found " + describeNext());
    }
    long v = integerBits(f);
    if (!TokenIds.isValid(v)) {
      throw error(TokenIds.outOfRange(integerText(f, v)));
    }
    return (int) v;
  }

  private int readBlockSize() throws IOException {
    // 0 is what vLLM's placeholder offload events carry (no tokens); the converter counts them
    return (int) readInteger(0, Integer.MAX_VALUE, "a block size (an integer >= 0)");
  }

  private @Nullable Integer readOptionalGroup() throws IOException {
    if (in.tryUnpackNil()) {
      return null;
    }
    return (int) readInteger(0, Integer.MAX_VALUE, "a KV cache group index (an integer >= 0)");
  }

  private @Nullable Integer readOptionalWindow() throws IOException {
    if (in.tryUnpackNil()) {
      return null;
    }
    return (int) readInteger(0, Integer.MAX_VALUE, "a sliding window in tokens (an integer >= 0)");
  }

  private @Nullable Long readOptionalLong() throws IOException {
    if (in.tryUnpackNil()) {
      return null;
    }
    MessageFormat f = nextFormat();
    if (f.getValueType() != ValueType.INTEGER) {
      throw error("expected an integer or nil, found " + describeNext());
    }
    return integerBits(f);
  }

  private @Nullable String readOptionalString() throws IOException {
    if (in.tryUnpackNil()) {
      return null;
    }
    if (nextFormat().getValueType() != ValueType.STRING) {
      throw error("expected a string or nil, found " + describeNext());
    }
    return in.unpackString();
  }

  private @Nullable List<@Nullable List<@Nullable Object>> readExtraKeys() throws IOException {
    if (in.tryUnpackNil()) {
      return null;
    }
    if (nextFormat().getValueType() != ValueType.ARRAY) {
      throw error("expected nil or an array with one entry per block, found " + describeNext());
    }
    int n = arrayHeader();
    List<@Nullable List<@Nullable Object>> out = new ArrayList<>(n);
    for (int i = 0; i < n; i++) {
      index(i);
      if (in.tryUnpackNil()) {
        out.add(null);
        continue;
      }
      if (nextFormat().getValueType() != ValueType.ARRAY) {
        throw error("expected nil or an array of extra keys, found " + describeNext());
      }
      @SuppressWarnings("unchecked")
      List<@Nullable Object> keys = (List<@Nullable Object>) readValue(1);
      out.add(keys);
    }
    index(-1);
    return Collections.unmodifiableList(out);
  }

  /** Any msgpack value as a plain Java value (see {@link EngineEvent.BlockStored#extraKeys()}). */
  private @Nullable Object readValue(int level) throws IOException {
    if (level > MAX_DEPTH) {
      throw error("values nest deeper than " + MAX_DEPTH + " levels");
    }
    MessageFormat f = nextFormat();
    switch (f.getValueType()) {
      case NIL -> {
        in.unpackNil();
        return null;
      }
      case BOOLEAN -> {
        return in.unpackBoolean();
      }
      case INTEGER -> {
        return integerBits(f);
      }
      case FLOAT -> {
        return in.unpackDouble();
      }
      case STRING -> {
        return in.unpackString();
      }
      case BINARY -> {
        int n = in.unpackBinaryHeader();
        checkRemaining(n, 1, "bytes");
        return in.readPayload(n);
      }
      case ARRAY -> {
        int n = arrayHeader();
        List<@Nullable Object> out = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
          out.add(readValue(level + 1));
        }
        return Collections.unmodifiableList(out);
      }
      case MAP -> {
        int n = mapHeader();
        Map<@Nullable Object, @Nullable Object> out = new LinkedHashMap<>();
        for (int i = 0; i < n; i++) {
          Object k = readValue(level + 1);
          out.put(k, readValue(level + 1));
        }
        return Collections.unmodifiableMap(out);
      }
      default -> {
        in.skipValue(); // extension values carry nothing we use
        return null;
      }
    }
  }

  private long readInteger(long min, long max, String what) throws IOException {
    MessageFormat f = nextFormat();
    if (f.getValueType() != ValueType.INTEGER) {
      throw error("expected " + what + ", found " + describeNext());
    }
    long v = integerBits(f);
    if (f == MessageFormat.UINT64 && v < 0) {
      throw error(
          "expected " + what + ", found the integer " + Long.toUnsignedString(v) + " (too big)");
    }
    if (v < min || v > max) {
      throw error("expected " + what + ", found the integer " + v + " (out of range)");
    }
    return v;
  }

  /**
   * The next integer, of format {@code f} (already peeked), as 64 bits: signed formats as their
   * value, uint64 as its bit pattern (values of 2^63 and more come out negative). One reader for
   * every integer; a uint64 is read as its 9 raw bytes (format byte, 8 big-endian bytes) into
   * {@code u64}, because msgpack-core's unpackLong throws on values above Long.MAX_VALUE and its
   * unpackBigInteger allocates.
   */
  private long integerBits(MessageFormat f) throws IOException {
    if (f != MessageFormat.UINT64) {
      return in.unpackLong();
    }
    byte[] b = u64;
    if (b == null) {
      b = u64 = new byte[9];
    }
    in.readPayload(b, 0, 9);
    return (long) BIG_ENDIAN_LONG.get(b, 1);
  }

  /** An integer read by {@link #integerBits} as the wire wrote it, in decimal. */
  private static String integerText(MessageFormat f, long bits) {
    return f == MessageFormat.UINT64 ? Long.toUnsignedString(bits) : Long.toString(bits);
  }

  private String fieldName() throws IOException {
    if (nextFormat().getValueType() != ValueType.STRING) {
      throw error("expected a field name (a string), found " + describeNext());
    }
    return in.unpackString();
  }

  private int arrayHeader() throws IOException {
    int n = in.unpackArrayHeader();
    checkRemaining(n, 1, "elements");
    return n;
  }

  private int mapHeader() throws IOException {
    int n = in.unpackMapHeader();
    checkRemaining(n, 2, "entries");
    return n;
  }

  /**
   * Skips {@code count} values whatever their shape. Not msgpack-core's {@code skipValue(int)}: it
   * adds each container's declared size to an int, so a forged header such as an array of 2^31-1
   * elements overflows that count and ends the skip early, after which the rest of the value is
   * read as if it were the next field (a truncated payload could even decode). Here every container
   * header is checked against the bytes left, and the count is a long.
   */
  private void skip(long count) throws IOException {
    while (count > 0) {
      MessageFormat f = nextFormat();
      switch (f.getValueType()) {
        case ARRAY -> count += arrayHeader();
        case MAP -> count += 2L * mapHeader();
        default -> in.skipValue(); // one scalar: skipValue() adds nothing to its count
      }
      count--;
    }
  }

  /** Every value takes at least one byte: a header that promises more is a truncated payload. */
  private void checkRemaining(int n, int bytesPerItem, String items) {
    long left = length - in.getTotalReadBytes();
    if (n < 0 || (long) n * bytesPerItem > left) {
      throw error(
          "the payload ends in the middle of a value (truncated): it declares "
              + Integer.toUnsignedString(n)
              + " "
              + items
              + " but only "
              + left
              + " bytes are left");
    }
  }

  // ---------------------------------------------------------------- errors

  /** Consumes the next value and describes it for an error message. */
  private String describeNext() throws IOException {
    MessageFormat f = nextFormat();
    switch (f.getValueType()) {
      case NIL -> {
        in.unpackNil();
        return "nil";
      }
      case BOOLEAN -> {
        return in.unpackBoolean() ? "true" : "false";
      }
      case INTEGER -> {
        return "the integer " + integerText(f, integerBits(f));
      }
      case FLOAT -> {
        return "the float " + in.unpackDouble();
      }
      case STRING -> {
        return "the string \"" + abbreviate(in.unpackString()) + "\"";
      }
      case BINARY -> {
        int n = in.unpackBinaryHeader();
        checkRemaining(n, 1, "bytes");
        in.readPayload(n);
        return n + " bytes of binary data";
      }
      case ARRAY -> {
        int n = arrayHeader();
        skip(n);
        return "an array of " + n + (n == 1 ? " element" : " elements");
      }
      case MAP -> {
        int n = mapHeader();
        skip(2L * n);
        return "a map of " + n + (n == 1 ? " entry" : " entries");
      }
      default -> {
        in.skipValue();
        return "an extension value";
      }
    }
  }

  /** The format of the next value; the byte 0xc1 is not msgpack at all. */
  private MessageFormat nextFormat() throws IOException {
    MessageFormat f = in.getNextFormat();
    if (f == MessageFormat.NEVER_USED) {
      throw error("not msgpack: found the byte 0xc1, which msgpack never uses");
    }
    return f;
  }

  private static String abbreviate(String s) {
    return s.length() <= 40 ? s : s.substring(0, 37) + "...";
  }

  private void requireField(boolean present, String field) {
    if (!present) {
      throw missingHere(field);
    }
  }

  /** A required field of the map being read (the innermost path level) is missing. */
  private KvEventDecodeException missingHere(String field) {
    rename(field);
    return error("missing required field");
  }

  /** A required field of the batch map is missing. */
  private KvEventDecodeException missing(String field) {
    depth = 0;
    push(field);
    return error("missing required field");
  }

  private KvEventDecodeException error(String problem) {
    return error(problem, null);
  }

  private KvEventDecodeException error(String problem, @Nullable Throwable cause) {
    return new KvEventDecodeException(path(), problem, in.getTotalReadBytes(), cause);
  }

  // ---------------------------------------------------------------- path

  private void push(@Nullable String name) {
    if (depth == names.length) {
      names = Arrays.copyOf(names, depth * 2);
      indexes = Arrays.copyOf(indexes, depth * 2);
    }
    names[depth] = name;
    indexes[depth] = -1;
    depth++;
  }

  private void rename(String name) {
    names[depth - 1] = name;
    indexes[depth - 1] = -1;
  }

  /** Sets the array index of the innermost level ({@code -1}: none). */
  private void index(int i) {
    indexes[depth - 1] = i;
  }

  private void pop() {
    depth--;
  }

  /** The dotted path of the current position, e.g. {@code events[1].block_hashes[0]}, or $. */
  private String path() {
    StringBuilder sb = new StringBuilder();
    for (int i = 0; i < depth; i++) {
      if (names[i] != null) {
        if (!sb.isEmpty()) sb.append('.');
        sb.append(names[i]);
      }
      if (indexes[i] >= 0) {
        sb.append('[').append(indexes[i]).append(']');
      }
    }
    return sb.isEmpty() ? "$" : sb.toString();
  }
}
