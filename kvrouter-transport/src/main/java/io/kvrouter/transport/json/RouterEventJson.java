package io.kvrouter.transport.json;

import com.fasterxml.jackson.core.JacksonException;
import com.fasterxml.jackson.core.JsonEncoding;
import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.core.JsonLocation;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.SerializableString;
import com.fasterxml.jackson.core.io.SerializedString;
import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.transport.kvevents.StorageTier;
import io.kvrouter.transport.kvevents.TieredEvent;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.StringWriter;
import java.io.UncheckedIOException;
import java.util.List;
import java.util.Objects;
import java.util.regex.Pattern;

/**
 * The JSON codec for router events in NVIDIA Dynamo's wire form, e.g. {@code
 * {"worker_id":1,"event":{"event_id":7,"data":{"stored":{"parent_hash":null,"blocks":[{"block_hash":42,"tokens_hash":42}]}},"dp_rank":0}}}.
 *
 * <p>Reading accepts {@code "data":"stored"|"removed"} objects and {@code "data":"cleared"} (also
 * {@code {"cleared":null}}); {@code dp_rank} inside {@code event} (Dynamo's place) or at the top
 * level, defaulting to 0; a missing or null {@code parent_hash} means the chain starts at the root.
 * The outer {@code storage_tier} (Dynamo's, {@code "device"} when absent) is read by {@link
 * #readTieredEvents} and {@link #readTieredEvent}, which require one of Dynamo's four names; the
 * other readers skip it as an unknown field. Unknown fields are skipped at every level whatever
 * their shape; {@code mm_extra_info} is one of them, because the router's own local hashes already
 * include the multimodal hashes. Every u64 (worker id, event id, hashes) may be written as an
 * unsigned decimal up to 2^64-1 or as a negative signed value down to -2^63; either way it is kept
 * as its 64-bit pattern.
 *
 * <p>Anything else — a wrong type, a missing or duplicated field, a float or an integer beyond 64
 * bits where an integer belongs, a stored event without blocks, truncated or trailing input — is an
 * {@link EventDecodeException} naming the field and the line and column. Reading is all-or-nothing:
 * an array of events is returned whole or not at all.
 *
 * <p>Writing produces the compact Dynamo form with {@code dp_rank} inside {@code event} and every
 * u64 as an unsigned decimal JSON number; the tiered writers put {@code storage_tier} first for an
 * event of a tier other than the device and leave it out for a device event (whose document is then
 * the same as the untiered writers'). All methods are thread-safe.
 */
public final class RouterEventJson {
  /*
   * Implementation notes
   *
   * Stateless facade over one shared JsonFactory (thread-safe once built). Reading is delegated
   * to a fresh EventReader per document; writing happens here, field by field through
   * pre-encoded SerializedString names. Jackson's own syntax errors (truncation, bad tokens,
   * stream constraints) are translated into EventDecodeException with the path from the
   * parser's context and the location from the exception.
   */

  private static final JsonFactory FACTORY = JsonFactory.builder().build();

  /** The source description Jackson puts into nested locations of its messages; dropped. */
  private static final Pattern SOURCE = Pattern.compile("\\[Source: [^;\\]]*; ");

  private static final SerializableString WORKER_ID = new SerializedString("worker_id");
  private static final SerializableString STORAGE_TIER = new SerializedString("storage_tier");
  private static final SerializableString EVENT = new SerializedString("event");
  private static final SerializableString EVENT_ID = new SerializedString("event_id");
  private static final SerializableString DATA = new SerializedString("data");
  private static final SerializableString DP_RANK = new SerializedString("dp_rank");
  private static final SerializableString STORED = new SerializedString("stored");
  private static final SerializableString PARENT_HASH = new SerializedString("parent_hash");
  private static final SerializableString BLOCKS = new SerializedString("blocks");
  private static final SerializableString BLOCK_HASH = new SerializedString("block_hash");
  private static final SerializableString TOKENS_HASH = new SerializedString("tokens_hash");
  private static final SerializableString REMOVED = new SerializedString("removed");
  private static final SerializableString BLOCK_HASHES = new SerializedString("block_hashes");

  private RouterEventJson() {}

  /** Decodes a document holding one event. */
  public static RouterEvent readEvent(String json) {
    Objects.requireNonNull(json, "json");
    try (JsonParser p = FACTORY.createParser(json)) {
      return readEvent(p);
    } catch (IOException e) {
      throw new UncheckedIOException(e); // close() of an in-memory parser
    }
  }

  /** Decodes a UTF-8 document holding one event. */
  public static RouterEvent readEvent(byte[] json) {
    Objects.requireNonNull(json, "json");
    try (JsonParser p = FACTORY.createParser(json)) {
      return readEvent(p);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /** Decodes a document holding one JSON array of events; returns all of them or throws. */
  public static List<RouterEvent> readEvents(String json) {
    Objects.requireNonNull(json, "json");
    try (JsonParser p = FACTORY.createParser(json)) {
      return readEvents(p);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /** Decodes a UTF-8 document holding one JSON array of events; returns all of them or throws. */
  public static List<RouterEvent> readEvents(byte[] json) {
    Objects.requireNonNull(json, "json");
    try (JsonParser p = FACTORY.createParser(json)) {
      return readEvents(p);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /**
   * Decodes a UTF-8 document holding one JSON array of events, each with the storage tier of its
   * outer {@code storage_tier} (Dynamo's {@code StorageTier}: {@code "device"} (the default when
   * absent), {@code "host_pinned"}, {@code "disk"}, {@code "external"}); returns all of them or
   * throws.
   */
  public static List<TieredEvent> readTieredEvents(byte[] json) {
    Objects.requireNonNull(json, "json");
    try (JsonParser p = FACTORY.createParser(json)) {
      try {
        return new EventReader(p).readArrayTiered();
      } catch (JacksonException e) {
        throw translate(p, e);
      }
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /**
   * Decodes a UTF-8 document holding one event, with the storage tier of its outer {@code
   * storage_tier} (as {@link #readTieredEvents}: {@code "device"} when absent).
   */
  public static TieredEvent readTieredEvent(byte[] json) {
    Objects.requireNonNull(json, "json");
    try (JsonParser p = FACTORY.createParser(json)) {
      try {
        return new EventReader(p).readSingleTiered();
      } catch (JacksonException e) {
        throw translate(p, e);
      }
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /**
   * Encodes one event of {@code tier} as compact JSON, with Dynamo's {@code storage_tier} unless
   * the tier is the device.
   */
  public static String writeEvent(StorageTier tier, RouterEvent event) {
    Objects.requireNonNull(tier, "tier");
    Objects.requireNonNull(event, "event");
    StringWriter out = new StringWriter(140);
    try (JsonGenerator g = FACTORY.createGenerator(out)) {
      write(g, tier, event);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return out.toString();
  }

  /**
   * Encodes one event of {@code tier} as compact UTF-8 JSON, with Dynamo's {@code storage_tier}
   * unless the tier is the device.
   */
  public static byte[] writeEventBytes(StorageTier tier, RouterEvent event) {
    Objects.requireNonNull(tier, "tier");
    Objects.requireNonNull(event, "event");
    ByteArrayOutputStream out = new ByteArrayOutputStream(128);
    try (JsonGenerator g = FACTORY.createGenerator(out, JsonEncoding.UTF8)) {
      write(g, tier, event);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return out.toByteArray();
  }

  /**
   * Encodes events, each with its tier, as one compact JSON array ({@code storage_tier} on those
   * not of the device); {@link #readTieredEvents} reads it back.
   */
  public static String writeTieredEvents(List<TieredEvent> events) {
    Objects.requireNonNull(events, "events");
    StringWriter out = new StringWriter(140 * (events.size() + 1));
    try (JsonGenerator g = FACTORY.createGenerator(out)) {
      g.writeStartArray();
      for (TieredEvent e : events) {
        Objects.requireNonNull(e, "events must not hold null");
        write(g, e.tier(), e.event());
      }
      g.writeEndArray();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return out.toString();
  }

  /**
   * Dynamo's name of a tier in {@code storage_tier} (serde snake_case of its {@code StorageTier}):
   * {@code device}, {@code host_pinned}, {@code disk}, {@code external}.
   */
  public static String storageTierName(StorageTier tier) {
    return switch (tier) {
      case DEVICE -> "device";
      case HOST -> "host_pinned";
      case DISK -> "disk";
      case EXTERNAL -> "external";
    };
  }

  /** Encodes one event as compact JSON. */
  public static String writeEvent(RouterEvent event) {
    Objects.requireNonNull(event, "event");
    StringWriter out = new StringWriter(128);
    try (JsonGenerator g = FACTORY.createGenerator(out)) {
      write(g, event);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return out.toString();
  }

  /** Encodes one event as compact UTF-8 JSON. */
  public static byte[] writeEventBytes(RouterEvent event) {
    Objects.requireNonNull(event, "event");
    ByteArrayOutputStream out = new ByteArrayOutputStream(128);
    try (JsonGenerator g = FACTORY.createGenerator(out, JsonEncoding.UTF8)) {
      write(g, event);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return out.toByteArray();
  }

  /** Encodes events as one compact JSON array. */
  public static String writeEvents(List<RouterEvent> events) {
    Objects.requireNonNull(events, "events");
    StringWriter out = new StringWriter(128 * (events.size() + 1));
    try (JsonGenerator g = FACTORY.createGenerator(out)) {
      g.writeStartArray();
      for (RouterEvent e : events) {
        write(g, Objects.requireNonNull(e, "events must not hold null"));
      }
      g.writeEndArray();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return out.toString();
  }

  private static RouterEvent readEvent(JsonParser p) throws IOException {
    try {
      return new EventReader(p).readSingle();
    } catch (JacksonException e) {
      throw translate(p, e);
    }
  }

  private static List<RouterEvent> readEvents(JsonParser p) throws IOException {
    try {
      return new EventReader(p).readArray();
    } catch (JacksonException e) {
      throw translate(p, e);
    }
  }

  private static EventDecodeException translate(JsonParser p, JacksonException e) {
    JsonLocation where = e.getLocation() != null ? e.getLocation() : p.currentLocation();
    String problem = e.getOriginalMessage();
    problem =
        problem == null ? e.getClass().getSimpleName() : SOURCE.matcher(problem).replaceAll("[");
    return EventReader.error(
        EventReader.path(p.getParsingContext()), "malformed JSON: " + problem, where, e);
  }

  private static void write(JsonGenerator g, RouterEvent event) throws IOException {
    write(g, StorageTier.DEVICE, event);
  }

  private static void write(JsonGenerator g, StorageTier tier, RouterEvent event)
      throws IOException {
    g.writeStartObject();
    if (tier != StorageTier.DEVICE) {
      g.writeFieldName(STORAGE_TIER);
      g.writeString(storageTierName(tier));
    }
    g.writeFieldName(WORKER_ID);
    writeU64(g, event.worker().workerId());
    g.writeFieldName(EVENT);
    g.writeStartObject();
    g.writeFieldName(EVENT_ID);
    writeU64(g, event.eventId());
    g.writeFieldName(DATA);
    switch (event.data()) {
      case CacheEvent.Stored s -> {
        g.writeStartObject();
        g.writeFieldName(STORED);
        g.writeStartObject();
        g.writeFieldName(PARENT_HASH);
        if (s.hasParent()) {
          writeU64(g, s.parentHash());
        } else {
          g.writeNull();
        }
        g.writeFieldName(BLOCKS);
        g.writeStartArray();
        long[] blocks = s.blockHashes();
        long[] tokens = s.tokensHashes();
        for (int i = 0; i < blocks.length; i++) {
          g.writeStartObject();
          g.writeFieldName(BLOCK_HASH);
          writeU64(g, blocks[i]);
          g.writeFieldName(TOKENS_HASH);
          writeU64(g, tokens[i]);
          g.writeEndObject();
        }
        g.writeEndArray();
        g.writeEndObject();
        g.writeEndObject();
      }
      case CacheEvent.Removed r -> {
        g.writeStartObject();
        g.writeFieldName(REMOVED);
        g.writeStartObject();
        g.writeFieldName(BLOCK_HASHES);
        g.writeStartArray();
        for (long h : r.blockHashes()) {
          writeU64(g, h);
        }
        g.writeEndArray();
        g.writeEndObject();
        g.writeEndObject();
      }
      case CacheEvent.Cleared c -> g.writeString("cleared");
    }
    g.writeFieldName(DP_RANK);
    g.writeNumber(event.worker().dpRank());
    g.writeEndObject();
    g.writeEndObject();
  }

  private static void writeU64(JsonGenerator g, long v) throws IOException {
    if (v >= 0) {
      g.writeNumber(v);
    } else {
      g.writeNumber(Long.toUnsignedString(v));
    }
  }
}
