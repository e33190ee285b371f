package io.kvrouter.transport.json;

import static java.util.Objects.requireNonNull;

import com.fasterxml.jackson.core.JsonLocation;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonStreamContext;
import com.fasterxml.jackson.core.JsonToken;
import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import io.kvrouter.transport.kvevents.StorageTier;
import io.kvrouter.transport.kvevents.TieredEvent;
import java.io.IOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.jspecify.annotations.Nullable;

/** A one-shot decoder of Dynamo's RouterEvent JSON from a Jackson streaming parser. */
final class EventReader {
  /*
   * Implementation notes
   *
   * One instance per input document, used by one thread, then dropped. Recursive descent that
   * mirrors the wire form:
   *
   *   {"worker_id": u64, "dp_rank"?: u32, "storage_tier"?: "device" | "host_pinned" | "disk"
   *     | "external", "event": {"event_id": u64, "dp_rank"?: u32,
   *     "data": "cleared" | {"cleared": null} | {"removed": {"block_hashes": [u64...]}}
   *           | {"stored": {"parent_hash"?: u64|null, "blocks": [{"block_hash": u64,
   *                                                                "tokens_hash": u64}...]}}}}
   *
   * Every read method is entered with the parser on the value's first token and returns with the
   * parser on its last token (the scalar itself, or the matching END_OBJECT / END_ARRAY). Fields
   * the codec does not know are skipped with skipChildren(), whatever their shape; that includes
   * mm_extra_info, which the router does not need because its own local hashes already include
   * the multimodal hashes (DESIGN.md §2). A known field given twice is an error.
   *
   * u64 values are read by JsonU64 (shared with the server's request bodies) from the token's
   * characters: "-" and digits in [-2^63, 2^64) are kept as 64-bit patterns, anything beyond is an
   * error.
   *
   * Error paths come from Jackson's parsing context, which already tracks field names and array
   * indexes; they are only built when something is wrong. After END_OBJECT Jackson has popped the
   * context, so the context then names the object itself: missing-field errors append the field
   * name to it. Block and token hashes of a Stored event accumulate in two growable scratch
   * arrays owned by this instance (always of equal length) and are copied out at the right
   * length per event; a Removed event's hashes use a third scratch array.
   *
   * storage_tier (Dynamo's StorageTier, serde snake_case, on the outer RouterEvent, default
   * device) is read only by readArrayTiered() and readSingleTiered(), which check it and pairs it with the event; the
   * other readers skip it as an unknown field, whatever its shape (their callers apply every
   * event as a device event).
   *
   * Nothing is returned until the whole document has been read and checked (including that no
   * content follows it), so a caller never sees part of a malformed input.
   */

  private static final int ROOT_WORKER_ID = 1;
  private static final int ROOT_EVENT = 2;
  private static final int ROOT_DP_RANK = 4;
  private static final int ROOT_STORAGE_TIER = 8;
  private static final int EVENT_ID = 1;
  private static final int EVENT_DATA = 2;
  private static final int EVENT_DP_RANK = 4;
  private static final int STORED_PARENT = 1;
  private static final int STORED_BLOCKS = 2;
  private static final int BLOCK_HASH = 1;
  private static final int BLOCK_TOKENS_HASH = 2;

  private final JsonParser p;

  // scratch for the event being read
  private long[] blockHashes = new long[16];
  private long[] tokensHashes = new long[16];
  private long[] removedHashes = new long[16];
  private int blockCount;
  private long eventId;
  private @Nullable CacheEvent data; // null: no event body read since the last readEvent
  private int eventDpRank;
  private StorageTier tier = StorageTier.DEVICE;
  private boolean tiered; // readArrayTiered: storage_tier is read and checked

  EventReader(JsonParser p) {
    this.p = p;
  }

  /** Reads a document that holds exactly one array of events, each with its storage tier. */
  List<TieredEvent> readArrayTiered() throws IOException {
    JsonToken t = p.nextToken();
    if (t != JsonToken.START_ARRAY) {
      throw typeError(t, "an array of events");
    }
    tiered = true;
    List<TieredEvent> out = new ArrayList<>();
    while ((t = p.nextToken()) != JsonToken.END_ARRAY) {
      RouterEvent e = readEvent(t);
      out.add(new TieredEvent(tier, e));
    }
    expectEndOfInput();
    return out;
  }

  /** Reads a document that holds exactly one event, with its storage tier. */
  TieredEvent readSingleTiered() throws IOException {
    tiered = true;
    RouterEvent e = readEvent(p.nextToken());
    expectEndOfInput();
    return new TieredEvent(tier, e);
  }

  /** Reads a document that holds exactly one event. */
  RouterEvent readSingle() throws IOException {
    RouterEvent e = readEvent(p.nextToken());
    expectEndOfInput();
    return e;
  }

  /** Reads a document that holds exactly one array of events. */
  List<RouterEvent> readArray() throws IOException {
    JsonToken t = p.nextToken();
    if (t != JsonToken.START_ARRAY) {
      throw typeError(t, "an array of events");
    }
    List<RouterEvent> out = new ArrayList<>();
    while ((t = p.nextToken()) != JsonToken.END_ARRAY) {
      out.add(readEvent(t));
    }
    expectEndOfInput();
    return out;
  }

  private RouterEvent readEvent(JsonToken t) throws IOException {
    if (t != JsonToken.START_OBJECT) {
      throw typeError(t, "an event object");
    }
    int seen = 0;
    long workerId = 0;
    int rootDpRank = -1;
    tier = StorageTier.DEVICE;
    while ((t = p.nextToken()) == JsonToken.FIELD_NAME) {
      String name = p.currentName();
      t = p.nextToken();
      switch (name) {
        case "worker_id" -> {
          seen = once(seen, ROOT_WORKER_ID);
          workerId = u64(t);
        }
        case "event" -> {
          seen = once(seen, ROOT_EVENT);
          readEventBody(t);
        }
        case "dp_rank" -> {
          seen = once(seen, ROOT_DP_RANK);
          rootDpRank = dpRank(t);
        }
        case "storage_tier" -> {
          if (tiered) {
            seen = once(seen, ROOT_STORAGE_TIER);
            tier = storageTier(t);
          } else {
            p.skipChildren(); // the device-only readers skip it, whatever its shape
          }
        }
        default -> p.skipChildren();
      }
    }
    requireEndObject(t);
    requireField(seen, ROOT_WORKER_ID, "worker_id");
    requireField(seen, ROOT_EVENT, "event");
    int dp;
    if (rootDpRank >= 0 && eventDpRank >= 0 && rootDpRank != eventDpRank) {
      throw error(
          childPath("dp_rank"),
          "top-level dp_rank "
              + rootDpRank
              + " contradicts event.dp_rank "
              + eventDpRank
              + " (give one, or the same value in both)",
          p.currentTokenLocation(),
          null);
    } else if (eventDpRank >= 0) {
      dp = eventDpRank;
    } else if (rootDpRank >= 0) {
      dp = rootDpRank;
    } else {
      dp = 0;
    }
    // requireField(ROOT_EVENT): readEventBody ran, and its requireField(EVENT_DATA) saw data
    CacheEvent d = requireNonNull(data, "data");
    data = null;
    return new RouterEvent(new Worker(workerId, dp), eventId, d);
  }

  /** Dynamo's StorageTier names (serde snake_case); anything else is an error, as in serde. */
  private StorageTier storageTier(JsonToken t) throws IOException {
    if (t == JsonToken.VALUE_STRING) {
      switch (p.getText()) {
        case "device" -> {
          return StorageTier.DEVICE;
        }
        case "host_pinned" -> {
          return StorageTier.HOST;
        }
        case "disk" -> {
          return StorageTier.DISK;
        }
        case "external" -> {
          return StorageTier.EXTERNAL;
        }
        default -> {}
      }
    }
    throw error(
        path(),
        "storage_tier must be one of \"device\", \"host_pinned\", \"disk\", \"external\", found "
            + (t == JsonToken.VALUE_STRING ? "\"" + p.getText() + "\"" : describe(t)),
        p.currentTokenLocation(),
        null);
  }

  private void readEventBody(JsonToken t) throws IOException {
    if (t != JsonToken.START_OBJECT) {
      throw typeError(t, "an object with event_id and data");
    }
    int seen = 0;
    eventDpRank = -1;
    while ((t = p.nextToken()) == JsonToken.FIELD_NAME) {
      String name = p.currentName();
      t = p.nextToken();
      switch (name) {
        case "event_id" -> {
          seen = once(seen, EVENT_ID);
          eventId = u64(t);
        }
        case "data" -> {
          seen = once(seen, EVENT_DATA);
          data = readData(t);
        }
        case "dp_rank" -> {
          seen = once(seen, EVENT_DP_RANK);
          eventDpRank = dpRank(t);
        }
        default -> p.skipChildren();
      }
    }
    requireEndObject(t);
    requireField(seen, EVENT_ID, "event_id");
    requireField(seen, EVENT_DATA, "data");
  }

  private CacheEvent readData(JsonToken t) throws IOException {
    if (t == JsonToken.VALUE_STRING) {
      if ("cleared".equals(p.getText())) {
        return CacheEvent.cleared();
      }
      throw error(
          path(),
          "expected \"cleared\" or an object with one of stored, removed, cleared; found "
              + describe(t),
          p.currentTokenLocation(),
          null);
    }
    if (t != JsonToken.START_OBJECT) {
      throw typeError(t, "\"cleared\" or an object with one of stored, removed, cleared");
    }
    CacheEvent result = null;
    while ((t = p.nextToken()) == JsonToken.FIELD_NAME) {
      String name = p.currentName();
      t = p.nextToken();
      CacheEvent kind;
      switch (name) {
        case "stored" -> kind = readStored(t);
        case "removed" -> kind = readRemoved(t);
        case "cleared" -> {
          if (t != JsonToken.VALUE_NULL) {
            throw typeError(t, "null (cleared carries no data)");
          }
          kind = CacheEvent.cleared();
        }
        default -> {
          p.skipChildren();
          continue;
        }
      }
      if (result != null) {
        throw error(
            path(),
            "data holds more than one of stored, removed, cleared",
            p.currentTokenLocation(),
            null);
      }
      result = kind;
    }
    requireEndObject(t);
    if (result == null) {
      throw error(
          path(p.getParsingContext()),
          "expected one of stored, removed, cleared; found none",
          p.currentTokenLocation(),
          null);
    }
    return result;
  }

  private CacheEvent readStored(JsonToken t) throws IOException {
    if (t != JsonToken.START_OBJECT) {
      throw typeError(t, "an object with parent_hash and blocks");
    }
    int seen = 0;
    boolean hasParent = false;
    long parent = 0;
    while ((t = p.nextToken()) == JsonToken.FIELD_NAME) {
      String name = p.currentName();
      t = p.nextToken();
      switch (name) {
        case "parent_hash" -> {
          seen = once(seen, STORED_PARENT);
          if (t != JsonToken.VALUE_NULL) {
            parent = u64(t);
            hasParent = true;
          }
        }
        case "blocks" -> {
          seen = once(seen, STORED_BLOCKS);
          readBlocks(t);
        }
        default -> p.skipChildren();
      }
    }
    requireEndObject(t);
    requireField(seen, STORED_BLOCKS, "blocks");
    long[] blocks = Arrays.copyOf(blockHashes, blockCount);
    long[] tokens = Arrays.copyOf(tokensHashes, blockCount);
    return hasParent
        ? CacheEvent.stored(parent, blocks, tokens)
        : CacheEvent.storedAtRoot(blocks, tokens);
  }

  private void readBlocks(JsonToken t) throws IOException {
    if (t != JsonToken.START_ARRAY) {
      throw typeError(t, "an array of blocks");
    }
    blockCount = 0;
    while ((t = p.nextToken()) != JsonToken.END_ARRAY) {
      readBlock(t);
    }
    if (blockCount == 0) {
      throw error(
          path(),
          "a stored event needs at least one block; found an empty list",
          p.currentTokenLocation(),
          null);
    }
  }

  private void readBlock(JsonToken t) throws IOException {
    if (t != JsonToken.START_OBJECT) {
      throw typeError(t, "a block object with block_hash and tokens_hash");
    }
    int seen = 0;
    long blockHash = 0;
    long tokensHash = 0;
    while ((t = p.nextToken()) == JsonToken.FIELD_NAME) {
      String name = p.currentName();
      t = p.nextToken();
      switch (name) {
        case "block_hash" -> {
          seen = once(seen, BLOCK_HASH);
          blockHash = u64(t);
        }
        case "tokens_hash" -> {
          seen = once(seen, BLOCK_TOKENS_HASH);
          tokensHash = u64(t);
        }
        default -> p.skipChildren(); // mm_extra_info and anything newer
      }
    }
    requireEndObject(t);
    requireField(seen, BLOCK_HASH, "block_hash");
    requireField(seen, BLOCK_TOKENS_HASH, "tokens_hash");
    int n = blockCount;
    if (n == blockHashes.length) {
      blockHashes = Arrays.copyOf(blockHashes, n * 2);
      tokensHashes = Arrays.copyOf(tokensHashes, n * 2);
    }
    blockHashes[n] = blockHash;
    tokensHashes[n] = tokensHash;
    blockCount = n + 1;
  }

  private CacheEvent readRemoved(JsonToken t) throws IOException {
    if (t != JsonToken.START_OBJECT) {
      throw typeError(t, "an object with block_hashes");
    }
    long[] hashes = null;
    while ((t = p.nextToken()) == JsonToken.FIELD_NAME) {
      String name = p.currentName();
      t = p.nextToken();
      if (name.equals("block_hashes")) {
        if (hashes != null) {
          throw duplicate();
        }
        hashes = readU64Array(t);
      } else {
        p.skipChildren();
      }
    }
    requireEndObject(t);
    if (hashes == null) {
      throw missing("block_hashes");
    }
    return CacheEvent.removed(hashes);
  }

  private long[] readU64Array(JsonToken t) throws IOException {
    if (t != JsonToken.START_ARRAY) {
      throw typeError(t, "an array of unsigned 64-bit integers");
    }
    long[] buf = removedHashes;
    int n = 0;
    while ((t = p.nextToken()) != JsonToken.END_ARRAY) {
      long v = u64(t);
      if (n == buf.length) {
        buf = Arrays.copyOf(buf, n * 2);
        removedHashes = buf;
      }
      buf[n++] = v;
    }
    return Arrays.copyOf(buf, n);
  }

  private int dpRank(JsonToken t) throws IOException {
    if (t == JsonToken.VALUE_NULL) {
      return -1; // same as absent
    }
    long v = u64(t);
    if (v < 0 || v > Integer.MAX_VALUE) {
      throw error(
          path(),
          "dp_rank must be in 0.." + Integer.MAX_VALUE + ", found " + p.getText(),
          p.currentTokenLocation(),
          null);
    }
    return (int) v;
  }

  /**
   * The 64-bit pattern of the integer token {@code t}: non-negative values up to 2^64-1 as
   * unsigned, negative values down to -2^63 as signed.
   */
  private long u64(JsonToken t) throws IOException {
    if (t != JsonToken.VALUE_NUMBER_INT) {
      throw typeError(t, "an unsigned 64-bit integer");
    }
    try {
      return JsonU64.read(p);
    } catch (JsonU64.OutOfRangeException e) {
      throw outOfRange();
    }
  }

  private EventDecodeException outOfRange() throws IOException {
    return error(
        path(),
        "integer "
            + JsonTokens.abbreviate(p.getText())
            + " is outside the 64-bit range "
            + JsonU64.RANGE,
        p.currentTokenLocation(),
        null);
  }

  private void expectEndOfInput() throws IOException {
    JsonToken t = p.nextToken();
    if (t != null) {
      throw error(
          "$",
          "expected the end of the input, found " + describe(t),
          p.currentTokenLocation(),
          null);
    }
  }

  private static void requireEndObject(JsonToken t) {
    // Jackson only ever yields FIELD_NAME or END_OBJECT inside an object
    if (t != JsonToken.END_OBJECT) {
      throw new IllegalStateException("parser yielded " + t + " inside an object");
    }
  }

  private int once(int seen, int bit) throws IOException {
    if ((seen & bit) != 0) {
      throw duplicate();
    }
    return seen | bit;
  }

  private EventDecodeException duplicate() throws IOException {
    return error(path(), "duplicate field", p.currentTokenLocation(), null);
  }

  /** Called on the END_OBJECT of an object that should have held {@code field}. */
  private void requireField(int seen, int bit, String field) {
    if ((seen & bit) == 0) {
      throw missing(field);
    }
  }

  private EventDecodeException missing(String field) {
    return error(childPath(field), "missing required field", p.currentTokenLocation(), null);
  }

  /** On an END_OBJECT token: the path of a field of the object that just ended. */
  private String childPath(String field) {
    String parent = path(p.getParsingContext());
    return parent.equals("$") ? field : parent + "." + field;
  }

  private EventDecodeException typeError(@Nullable JsonToken t, String expected)
      throws IOException {
    return error(
        path(),
        "expected " + expected + ", found " + describe(t),
        t == null ? p.currentLocation() : p.currentTokenLocation(),
        null);
  }

  private String describe(@Nullable JsonToken t) throws IOException {
    return t == null ? "end of input" : JsonTokens.describe(p, t);
  }

  private String path() {
    return path(p.getParsingContext());
  }

  /**
   * The dotted path of the parser's current position, e.g. {@code event.data.stored.blocks[1]}, or
   * {@code $} at the root. On a START_OBJECT / START_ARRAY token the (new, still unnamed) context
   * contributes nothing, so the path names the field that holds it.
   */
  static String path(JsonStreamContext ctx) {
    StringBuilder sb = new StringBuilder();
    appendPath(ctx, sb);
    return sb.isEmpty() ? "$" : sb.toString();
  }

  private static void appendPath(@Nullable JsonStreamContext ctx, StringBuilder sb) {
    if (ctx == null || ctx.inRoot()) {
      return;
    }
    appendPath(ctx.getParent(), sb);
    if (ctx.inObject()) {
      String name = ctx.getCurrentName();
      if (name != null) {
        if (!sb.isEmpty()) {
          sb.append('.');
        }
        sb.append(name);
      }
    } else if (ctx.inArray() && ctx.hasCurrentIndex()) {
      sb.append('[').append(ctx.getCurrentIndex()).append(']');
    }
  }

  static EventDecodeException error(
      String path, String problem, @Nullable JsonLocation where, @Nullable Throwable cause) {
    int line = where == null ? -1 : where.getLineNr();
    int column = where == null ? -1 : where.getColumnNr();
    return new EventDecodeException(path, problem, line, column, cause);
  }
}
