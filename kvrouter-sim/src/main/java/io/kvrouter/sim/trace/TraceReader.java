package io.kvrouter.sim.trace;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParseException;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import it.unimi.dsi.fastutil.longs.LongArrayList;
import java.io.BufferedInputStream;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.zip.GZIPInputStream;

/**
 * Reads a request trace in the Mooncake JSONL format (one object per line: {@code timestamp},
 * {@code input_length}, {@code output_length}, {@code hash_ids}), plain or gzip-compressed.
 *
 * <pre>
 * Implementation notes
 *
 * One Jackson streaming parser per line, so a malformed line is reported with its own line
 * number whatever the previous lines were. Blank lines are skipped. Unknown fields are skipped
 * whatever their shape. Every rule a later stage relies on is checked here, so that the
 * simulation never fails half-way on bad input:
 *   timestamp     a finite number >= 0, not smaller than the previous line's (arrival order)
 *   input_length  an integer >= 1
 *   output_length an integer >= 0
 *   hash_ids      an array of integers >= 0 with exactly ceil(input_length / 512) elements
 * A known field given twice is an error. Gzip is recognised by its magic bytes, not the name.
 * </pre>
 */
public final class TraceReader {
  private static final JsonFactory JSON = new JsonFactory();

  private TraceReader() {}

  /** Reads at most {@code limit} requests of the trace at {@code path}. */
  public static List<TraceRequest> read(Path path, int limit) {
    try (InputStream in = Files.newInputStream(path)) {
      return read(in, path.toString(), limit);
    } catch (NoSuchFileException e) {
      throw new TraceFormatException(path + ": no such file", e);
    } catch (IOException e) {
      throw new TraceFormatException(path + ": cannot read it: " + e.getMessage(), e);
    }
  }

  /**
   * Reads at most {@code limit} requests from {@code in} (plain or gzip); {@code source} names it
   * in error messages.
   */
  public static List<TraceRequest> read(InputStream in, String source, int limit) {
    List<TraceRequest> out = new ArrayList<>();
    int lineNo = 0;
    try (BufferedReader r =
        new BufferedReader(new InputStreamReader(decompress(in), StandardCharsets.UTF_8))) {
      double previous = 0;
      String line;
      while (out.size() < limit && (line = r.readLine()) != null) {
        lineNo++;
        if (line.isBlank()) continue;
        TraceRequest req = parseLine(line, source, lineNo);
        if (req.timestampMs() < previous) {
          throw new TraceFormatException(
              source,
              lineNo,
              "timestamp",
              "arrival "
                  + number(req.timestampMs())
                  + " ms is before the previous request's "
                  + number(previous)
                  + " ms; requests must be in arrival order");
        }
        previous = req.timestampMs();
        out.add(req);
      }
    } catch (IOException e) {
      throw new TraceFormatException(
          source + (lineNo > 0 ? ", after line " + lineNo : "") + ": cannot read it: " + e, e);
    }
    if (out.isEmpty()) {
      throw new TraceFormatException(source, 0, null, "holds no request");
    }
    return out;
  }

  private static InputStream decompress(InputStream in) throws IOException {
    BufferedInputStream b = new BufferedInputStream(in, 1 << 16);
    b.mark(2);
    int m0 = b.read();
    int m1 = b.read();
    b.reset();
    return m0 == 0x1f && m1 == 0x8b ? new GZIPInputStream(b, 1 << 16) : b;
  }

  /** Parses one line; {@code lineNo} is 1-based. */
  public static TraceRequest parseLine(String line, String source, int lineNo) {
    try (JsonParser p = JSON.createParser(line)) {
      if (p.nextToken() != JsonToken.START_OBJECT) {
        throw new TraceFormatException(source, lineNo, null, "expected a JSON object");
      }
      Double timestamp = null;
      Long input = null;
      Long output = null;
      long[] ids = null;
      JsonToken t;
      while ((t = p.nextToken()) == JsonToken.FIELD_NAME) {
        String name = p.currentName();
        JsonToken v = p.nextToken();
        switch (name) {
          case "timestamp" -> {
            once(timestamp, source, lineNo, name);
            timestamp = number(p, v, source, lineNo, name);
            if (!(timestamp >= 0) || Double.isInfinite(timestamp)) {
              throw new TraceFormatException(
                  source, lineNo, name, "expected a number >= 0, got " + p.getText());
            }
          }
          case "input_length" -> {
            once(input, source, lineNo, name);
            input = integer(p, v, source, lineNo, name, 1, Integer.MAX_VALUE);
          }
          case "output_length" -> {
            once(output, source, lineNo, name);
            output = integer(p, v, source, lineNo, name, 0, Integer.MAX_VALUE);
          }
          case "hash_ids" -> {
            once(ids, source, lineNo, name);
            ids = ids(p, v, source, lineNo);
          }
          default -> p.skipChildren();
        }
      }
      if (t != JsonToken.END_OBJECT) {
        throw new TraceFormatException(source, lineNo, null, "expected a field name or '}'");
      }
      if (p.nextToken() != null) {
        throw new TraceFormatException(
            source, lineNo, null, "unexpected content after the object (one object per line)");
      }
      if (timestamp == null) throw missing(source, lineNo, "timestamp");
      if (input == null) throw missing(source, lineNo, "input_length");
      if (output == null) throw missing(source, lineNo, "output_length");
      if (ids == null) throw missing(source, lineNo, "hash_ids");
      long expected = (input + TraceRequest.TRACE_BLOCK - 1) / TraceRequest.TRACE_BLOCK;
      if (ids.length != expected) {
        throw new TraceFormatException(
            source,
            lineNo,
            "hash_ids",
            "has "
                + ids.length
                + " ids but input_length "
                + input
                + " needs ceil("
                + input
                + " / 512) = "
                + expected);
      }
      return new TraceRequest(lineNo, timestamp, (int) (long) input, (int) (long) output, ids);
    } catch (JsonParseException e) {
      String msg = e.getOriginalMessage();
      int nl = msg.indexOf('\n');
      throw new TraceFormatException(
          source,
          lineNo,
          null,
          "malformed JSON at column "
              + e.getLocation().getColumnNr()
              + ": "
              + (nl < 0 ? msg : msg.substring(0, nl)));
    } catch (IOException e) {
      throw new TraceFormatException(source, lineNo, null, "cannot parse it: " + e.getMessage());
    }
  }

  private static void once(Object seen, String source, int lineNo, String name) {
    if (seen != null) throw new TraceFormatException(source, lineNo, name, "given twice");
  }

  private static TraceFormatException missing(String source, int lineNo, String name) {
    return new TraceFormatException(source, lineNo, name, "missing");
  }

  private static double number(JsonParser p, JsonToken v, String source, int lineNo, String name)
      throws IOException {
    if (v != JsonToken.VALUE_NUMBER_INT && v != JsonToken.VALUE_NUMBER_FLOAT) {
      throw new TraceFormatException(source, lineNo, name, "expected a number, got " + shown(p, v));
    }
    return p.getDoubleValue();
  }

  private static long integer(
      JsonParser p, JsonToken v, String source, int lineNo, String name, long min, long max)
      throws IOException {
    if (v != JsonToken.VALUE_NUMBER_INT) {
      throw new TraceFormatException(
          source, lineNo, name, "expected an integer, got " + shown(p, v));
    }
    if (p.getNumberType() == JsonParser.NumberType.BIG_INTEGER
        || p.getLongValue() < min
        || p.getLongValue() > max) {
      throw new TraceFormatException(
          source,
          lineNo,
          name,
          "expected an integer in [" + min + ", " + max + "], got " + p.getText());
    }
    return p.getLongValue();
  }

  private static long[] ids(JsonParser p, JsonToken v, String source, int lineNo)
      throws IOException {
    if (v != JsonToken.START_ARRAY) {
      throw new TraceFormatException(
          source, lineNo, "hash_ids", "expected an array of integers, got " + shown(p, v));
    }
    LongArrayList ids = new LongArrayList();
    JsonToken t;
    while ((t = p.nextToken()) != JsonToken.END_ARRAY) {
      String field = "hash_ids[" + ids.size() + "]";
      ids.add(integer(p, t, source, lineNo, field, 0, Long.MAX_VALUE));
    }
    return ids.toLongArray();
  }

  private static String shown(JsonParser p, JsonToken v) throws IOException {
    return switch (v) {
      case START_ARRAY -> "an array";
      case START_OBJECT -> "an object";
      case VALUE_STRING -> "the string \"" + p.getText() + "\"";
      default -> p.getText();
    };
  }

  private static String number(double v) {
    return v == Math.rint(v) ? Long.toString((long) v) : Double.toString(v);
  }
}
