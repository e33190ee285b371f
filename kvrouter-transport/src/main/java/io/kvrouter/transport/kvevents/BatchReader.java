package io.kvrouter.transport.kvevents;

import java.io.IOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
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
   *           | ["BlockRemoved", hashes, medium?, group_idx?, kind?, ignored...]
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
   * msgpack-core's own exceptions are translated at the top: running out of bytes is
   * "truncated", the byte 0xc1 is "not msgpack"; both carry the path reached so far.
   */

  private static final int MAX_DEPTH = 32;

  private final MessageUnpacker in;
  private final int length;

  private String[] names = new String[8];
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
          f == MessageFormat.UINT64 ? in.unpackBigInteger().doubleValue() : in.unpackLong();
      default -> throw error("expected a timestamp (a number), found " + describeNext());
    };
  }

  private Integer readDpRank() throws IOException {
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
  private EngineEvent readEvent() throws IOException {
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

  private EngineEvent readStoredArray(int fields) throws IOException {
    if (fields < 4) {
      throw error(
          "BlockStored needs block_hashes, parent_block_hash, token_ids and block_size; found only "
              + fields
              + (fields == 1 ? " field" : " fields"));
    }
    Fields f = new Fields();
    push("block_hashes");
    f.blockHashes = readHashes();
    rename("parent_block_hash");
    readParent(f);
    rename("token_ids");
    f.tokenIds = readTokens();
    rename("block_size");
    f.blockSize = readBlockSize();
    int read = 4;
    if (read < fields) {
      rename("lora_id");
      f.loraId = readOptionalLong();
      read++;
    }
    if (read < fields) {
      rename("medium");
      f.medium = readOptionalString();
      read++;
    }
    if (read < fields) {
      rename("lora_name");
      f.loraName = readOptionalString();
      read++;
    }
    if (read < fields) {
      rename("extra_keys");
      f.extraKeys = readExtraKeys();
      read++;
    }
    if (read < fields) {
      rename("group_idx");
      f.groupIdx = readOptionalGroup();
      read++;
    }
    if (read < fields) {
      rename("kv_cache_spec_kind");
      f.kind = readOptionalString();
      read++;
    }
    pop();
    skip(fields - read); // kv_cache_spec_sliding_window and anything newer
    return f.stored();
  }

  private EngineEvent readRemovedArray(int fields) throws IOException {
    if (fields < 1) {
      throw error("BlockRemoved needs block_hashes; found no fields");
    }
    Fields f = new Fields();
    push("block_hashes");
    f.blockHashes = readHashes();
    int read = 1;
    if (read < fields) {
      rename("medium");
      f.medium = readOptionalString();
      read++;
    }
    if (read < fields) {
      rename("group_idx");
      f.groupIdx = readOptionalGroup();
      read++;
    }
    if (read < fields) {
      rename("kv_cache_spec_kind");
      f.kind = readOptionalString();
      read++;
    }
    pop();
    skip(fields - read);
    return f.removed();
  }

  private EngineEvent readEventMap(int n) throws IOException {
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
          skip(2 * (n - 1));
          pop();
          return null;
        }
        continue;
      }
      if (!f.readField(key)) {
        skip(1);
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
            requireField(f.blockSize > 0, "block_size");
            yield f.stored();
          }
          case "BlockRemoved" -> {
            requireField(f.blockHashes != null, "block_hashes");
            yield f.removed();
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
    long[] blockHashes;
    boolean hasParent;
    long parent;
    int[] tokenIds;
    int blockSize;
    Long loraId;
    String medium;
    String loraName;
    List<List<Object>> extraKeys;
    Integer groupIdx;
    String kind;
    String cacheSalt;
    int seen;

    /** Reads the value of a known map field; false for a field to skip. */
    boolean readField(String key) throws IOException {
      int bit =
          switch (key) {
            case "block_hashes" -> 1;
            case "parent_block_hash" -> 2;
            case "token_ids" -> 4;
            case "block_size" -> 8;
            case "lora_id" -> 16;
            case "medium" -> 32;
            case "lora_name" -> 64;
            case "extra_keys" -> 128;
            case "group_idx" -> 256;
            case "kv_cache_spec_kind" -> 512;
            case "cache_salt" -> 1024;
            default -> 0;
          };
      if (bit == 0) {
        return false;
      }
      if ((seen & bit) != 0) {
        throw error("duplicate field");
      }
      seen |= bit;
      switch (key) {
        case "block_hashes" -> blockHashes = readHashes();
        case "parent_block_hash" -> readParent(this);
        case "token_ids" -> tokenIds = readTokens();
        case "block_size" -> blockSize = readBlockSize();
        case "lora_id" -> loraId = readOptionalLong();
        case "medium" -> medium = readOptionalString();
        case "lora_name" -> loraName = readOptionalString();
        case "extra_keys" -> extraKeys = readExtraKeys();
        case "group_idx" -> groupIdx = readOptionalGroup();
        case "kv_cache_spec_kind" -> kind = readOptionalString();
        case "cache_salt" -> cacheSalt = readOptionalString();
        default -> throw new IllegalStateException(key);
      }
      return true;
    }

    EngineEvent.BlockStored stored() {
      return new EngineEvent.BlockStored(
          blockHashes,
          hasParent,
          parent,
          tokenIds,
          blockSize,
          loraId,
          medium,
          loraName,
          extraKeys,
          groupIdx,
          kind,
          cacheSalt);
    }

    EngineEvent.BlockRemoved removed() {
      return new EngineEvent.BlockRemoved(blockHashes, medium, groupIdx, kind);
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

  private void readParent(Fields f) throws IOException {
    if (in.tryUnpackNil()) {
      f.hasParent = false;
      f.parent = 0L;
    } else {
      f.parent = readHash();
      f.hasParent = true;
    }
  }

  private long readHash() throws IOException {
    MessageFormat f = nextFormat();
    switch (f.getValueType()) {
      case INTEGER -> {
        return f == MessageFormat.UINT64 ? in.unpackBigInteger().longValue() : in.unpackLong();
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
      out[i] = (int) readInteger(Integer.MIN_VALUE, 0xFFFF_FFFFL, "a 32-bit token id");
    }
    index(-1);
    return out;
  }

  private int readBlockSize() throws IOException {
    return (int) readInteger(1, Integer.MAX_VALUE, "a block size (an integer >= 1)");
  }

  private Integer readOptionalGroup() throws IOException {
    if (in.tryUnpackNil()) {
      return null;
    }
    return (int) readInteger(0, Integer.MAX_VALUE, "a KV cache group index (an integer >= 0)");
  }

  private Long readOptionalLong() throws IOException {
    if (in.tryUnpackNil()) {
      return null;
    }
    MessageFormat f = nextFormat();
    if (f.getValueType() != ValueType.INTEGER) {
      throw error("expected an integer or nil, found " + describeNext());
    }
    return f == MessageFormat.UINT64 ? in.unpackBigInteger().longValue() : in.unpackLong();
  }

  private String readOptionalString() throws IOException {
    if (in.tryUnpackNil()) {
      return null;
    }
    if (nextFormat().getValueType() != ValueType.STRING) {
      throw error("expected a string or nil, found " + describeNext());
    }
    return in.unpackString();
  }

  private List<List<Object>> readExtraKeys() throws IOException {
    if (in.tryUnpackNil()) {
      return null;
    }
    if (nextFormat().getValueType() != ValueType.ARRAY) {
      throw error("expected nil or an array with one entry per block, found " + describeNext());
    }
    int n = arrayHeader();
    List<List<Object>> out = new ArrayList<>(n);
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
      List<Object> keys = (List<Object>) readValue(1);
      out.add(keys);
    }
    index(-1);
    return Collections.unmodifiableList(out);
  }

  /** Any msgpack value as a plain Java value (see {@link EngineEvent.BlockStored#extraKeys()}). */
  private Object readValue(int level) throws IOException {
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
        return f == MessageFormat.UINT64 ? in.unpackBigInteger().longValue() : in.unpackLong();
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
        List<Object> out = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
          out.add(readValue(level + 1));
        }
        return Collections.unmodifiableList(out);
      }
      case MAP -> {
        int n = mapHeader();
        Map<Object, Object> out = new LinkedHashMap<>();
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
    if (f == MessageFormat.UINT64) {
      long bits = in.unpackBigInteger().longValue();
      if (bits >= 0 && bits <= max) {
        return bits;
      }
      throw error(
          "expected " + what + ", found the integer " + Long.toUnsignedString(bits) + " (too big)");
    }
    long v = in.unpackLong();
    if (v < min || v > max) {
      throw error("expected " + what + ", found the integer " + v + " (out of range)");
    }
    return v;
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
        return "the integer "
            + (f == MessageFormat.UINT64
                ? in.unpackBigInteger().toString()
                : Long.toString(in.unpackLong()));
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
        skip(2 * n);
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

  private KvEventDecodeException error(String problem, Throwable cause) {
    return new KvEventDecodeException(path(), problem, in.getTotalReadBytes(), cause);
  }

  // ---------------------------------------------------------------- path

  private void push(String name) {
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
